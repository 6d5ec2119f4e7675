"""Raw iterations, devices and the outbox."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
import structlog
from pydantic import ValidationError

from labd.events import Event, IterationDone
from labd.model import (
    AdminState,
    Device,
    Iteration,
)
from labd.store import outbox as outbox_mod
from labd.store.base import DeviceTaken, StoreBase
from labd.store.fencing import fence
from labd.store.outbox import OutboxRow, append_job_event
from labd.store.tables import devices, iterations, outbox_set_aside
from labd.store.tables import outbox as outbox_table
from labd.throttle import OncePerMinute

# IterationDone is the stored iteration less its timestamps, fingerprint and flags.
ITERATION_EVENT_FIELDS = set(IterationDone.model_fields) & set(Iteration.model_fields)


log = structlog.get_logger("labd.store")
_SAID = OncePerMinute()  # stored devices said to be invalid


class Records(StoreBase):
    """The outbox, raw iterations and devices."""

    # Outbox ---------------------------------------------------------------------------------

    async def outbox_pending(self, limit: int = 100, skip: Collection[int] = ()) -> list[OutboxRow]:
        """This host's undelivered messages, oldest first, but for the ids in `skip`."""
        return await self.read(lambda conn: outbox_mod.pending(conn, self.host, limit, skip))

    async def outbox_newest(self) -> dict[str, int]:
        """The newest undelivered event's number of each job with events in the outbox."""
        return await self.read(lambda conn: outbox_mod.newest_job_seqs(conn, self.host))

    async def outbox_done(self, ids: Sequence[int]) -> None:
        """Forget delivered messages."""
        if ids:
            delete = outbox_table.delete().where(outbox_table.c.id.in_(list(ids)))
            await self.write(lambda conn: conn.execute(delete))

    async def outbox_set_aside(self, row: OutboxRow, error: str) -> None:
        """Move an undeliverable row out of the way, keeping it and why (nothing is lost)."""

        def move(conn: sa.Connection) -> None:
            conn.execute(
                outbox_set_aside.insert().values(
                    host=self.host,
                    stream=row.stream,
                    key=row.key,
                    seq=row.seq,
                    body=row.body,
                    error=error,
                    set_aside_at=self.clock.now(),
                )
            )
            conn.execute(outbox_table.delete().where(outbox_table.c.id == row.id))

        await self.write(move)

    async def record_event(self, stream: str, key: str, event: Event) -> None:
        """Queue an event that belongs to no job's sequence (an alert) for delivery, then
        publish it on the bus."""
        await self.write(lambda conn: outbox_mod.append(conn, self.host, stream, key, event))
        self.announce([event])

    async def outbox_depth(self) -> int:
        query = sa.select(sa.func.count()).where(outbox_table.c.host == self.host)
        count: int | None = await self.read(lambda conn: conn.scalar(query))
        return count or 0

    # Iterations -----------------------------------------------------------------------------

    async def add_iteration(self, iteration: Iteration, token: str | None) -> None:
        """Store one raw iteration and its event. `token` is the lease the writer holds: the
        write is refused with LeaseLost once the lease moved on. None only for a job run
        outside the scheduler (tools and benchmarks), which no other host can own."""
        row = {
            "job_id": iteration.job_id,
            "attempt": iteration.attempt,
            "idx": iteration.index,
            "record": iteration.model_dump(mode="json"),
        }
        done = IterationDone(
            **iteration.model_dump(include=ITERATION_EVENT_FIELDS),
            duration_s=(iteration.finished_at - iteration.started_at).total_seconds(),
        )

        def add(conn: sa.Connection) -> None:
            if token is not None:
                fence(conn, iteration.job_id, token)
            conn.execute(iterations.insert(), row)
            append_job_event(conn, self.host, done)

        await self.write(add)
        self.announce([done])

    async def iterations(self, job_id: str, attempt: int | None = None) -> list[Iteration]:
        """Raw iterations of a job (one attempt, or every attempt), in order."""
        query = sa.select(iterations.c.record).where(iterations.c.job_id == job_id)
        if attempt is not None:
            query = query.where(iterations.c.attempt == attempt)
        query = query.order_by(iterations.c.attempt, iterations.c.idx)
        records = await self.read(lambda conn: conn.scalars(query).all())
        return [Iteration.model_validate(r) for r in records]

    # Devices --------------------------------------------------------------------------------

    async def upsert_device(self, device: Device) -> Device:
        """Record a device as seen now; the stored admin state wins over the given one."""

        def upsert(conn: sa.Connection) -> Device:
            seen = device
            admin = conn.scalar(sa.select(devices.c.admin).where(devices.c.id == seen.id))
            if admin is not None:
                seen = seen.model_copy(update={"admin": AdminState(admin)})
            values = {
                "host": seen.host,
                "record": seen.model_dump(mode="json"),
                "state": seen.state.value,
                "admin": seen.admin.value,
                "updated_at": self.clock.now(),
            }
            if admin is None:
                try:
                    conn.execute(devices.insert().values(id=seen.id, **values))
                except sa.exc.IntegrityError as e:  # inserted since the read: another host's
                    raise DeviceTaken(f"device {seen.id!r} was recorded by another host") from e
            else:
                conn.execute(devices.update().where(devices.c.id == seen.id).values(**values))
            return seen

        return await self.write(upsert)

    async def set_admin(self, device_id: str, admin: AdminState) -> Device | None:

        def set_admin(conn: sa.Connection) -> Device | None:
            record = conn.scalar(sa.select(devices.c.record).where(devices.c.id == device_id))
            if record is None:
                return None
            device = Device.checked(record).model_copy(update={"admin": admin})
            conn.execute(
                devices.update()
                .where(devices.c.id == device_id)
                .values(admin=admin.value, record=device.model_dump(mode="json"))
            )
            return device

        return await self.write(set_admin)

    async def list_devices(self, host: str | None = None) -> list[Device]:
        query = sa.select(devices.c.record).order_by(devices.c.id)
        if host is not None:
            query = query.where(devices.c.host == host)
        records = await self.read(lambda conn: conn.scalars(query).all())
        return [device for r in records if (device := _readable_device(r)) is not None]

    async def get_device(self, device_id: str) -> Device | None:
        query = sa.select(devices.c.record).where(devices.c.id == device_id)
        record = await self.read(lambda conn: conn.scalar(query))
        return _readable_device(record) if record is not None else None


def _readable_device(record: Any) -> Device | None:
    """A stored device, or None for a row no device may be (a plugin's id that broke the
    naming rule, stored before the pool checked what drivers return): left out and said, so
    that one bad row does not stop every listing, submission and the daemon's start."""
    try:
        return Device.checked(record)
    except ValidationError as e:
        device = repr(record.get("id") if isinstance(record, dict) else None)[:140]
        if (left_out := _SAID.due(device)) is not None:  # every listing reads it: once a minute
            log.error(
                "stored device left out: not a valid device",
                device=device,
                problem=str(e).splitlines()[0:3],
                hint="delete its row from the devices table",
                left_out=left_out,
            )
        return None

"""One daemon per host name in a shared database. A host takes back the leases held under its
name when it starts (they were its own, before a restart); a second host given the same
`daemon.host` (a cloned machine, a copied configuration) took the first one's running job that
way and cost it an attempt. On PostgreSQL the name is held by a session advisory lock, kept
with its connection for the daemon's life: a host that dies lets go of it at once. On SQLite
the database file itself is held (flock, which SQLite's own fcntl locks never meet): the state
directory's lock does not cover a store.url naming a file elsewhere, shared by two daemons."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterable

import sqlalchemy as sa
import structlog

from labd.errors import LabdError
from labd.model import Device, DeviceState, JobState, job_running_on
from labd.store.advisory import SessionLock
from labd.store.store import Store
from labd.store.tables import ACTIVE_STATES, jobs

log = structlog.get_logger("labd.store")

KEEP_EVERY_S = 2.0  # how soon after the database returns the name is held again


def host_key(host: str) -> int:
    """The advisory lock's key for a host name: 64 bits of its SHA-256, signed as bigint."""
    digest = hashlib.sha256(f"labd host {host}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class HostName:
    """Holds this host's name in the database while the daemon runs (PostgreSQL only: on
    SQLite the database is the state directory's, which `labd run` locks)."""

    def __init__(self, store: Store, host: str) -> None:
        self.store, self.host = store, host
        self._lock = SessionLock(store, host_key(host))
        self._file: int | None = None  # the SQLite database, held

    async def take(self) -> None:
        """Hold the name, or LabdError: another daemon runs under it."""
        if self.store.dialect == "sqlite" and self._file is None:
            self._file = _hold_file(self.store.engine.url.database or "")
        if self.store.dialect == "postgresql" and not await self._lock.hold():
            raise LabdError(
                f"another labd runs as host {self.host!r} on this database: give each host a "
                "daemon.host of its own (it would take the other's running jobs as its own)"
            )

    async def keep(self, lost: Callable[[str], None]) -> None:
        """Take the name again whenever the database comes back (a restart ends the session
        and its lock: a second daemon under the name then started and took this one's job).
        Should another daemon hold it by then, `lost` is told why, and this one must stop."""
        if self.store.dialect != "postgresql":
            return
        while True:
            await asyncio.sleep(KEEP_EVERY_S)
            was = self._lock.held
            try:
                await self.take()
            except LabdError as e:
                lost(str(e))
                return
            except Exception:  # the database is away: try again at the next tick
                continue
            if not was:
                log.info("host name held again after the database came back", host=self.host)

    async def release(self) -> None:
        await self._lock.release()
        if self._file is not None:
            os.close(self._file)
            self._file = None


async def running_hosts(store: Store, hosts: Iterable[str]) -> set[str]:
    """Which of these host names a running labd holds: this store's own, and on PostgreSQL
    those whose advisory lock some session holds (a daemon killed lets go of it when its
    connection dies). Only one daemon can use a SQLite database: other names there are a
    daemon.host since renamed."""
    hosts = set(hosts)
    if store.dialect != "postgresql":
        return {store.host} & hosts
    # pg_locks shows a bigint key's high and low 32 bits as classid and objid (objsubid 1).
    query = sa.text(
        "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory' "
        "AND objsubid = 1 AND granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    rows = await store.read(lambda conn: conn.execute(query).all())
    held = {_signed((high << 32) | low) for high, low in rows}
    return {host for host in hosts if host_key(host) in held} | {store.host} & hosts


def _signed(key: int) -> int:
    return key - (1 << 64) if key >= 1 << 63 else key


async def fleet_devices(store: Store) -> list[Device]:
    """Every device of the lab as its host last recorded it, except that a device whose host
    runs no labd is offline, saying so (its row keeps the state it had when the host died), and
    so is a busy device whose job is no longer its host's (below)."""
    devices = await store.list_devices()
    running = await running_hosts(store, {device.host for device in devices})
    shown = [device if device.host in running else _host_gone(device) for device in devices]
    lost = await _jobs_lost(store, shown)
    return [_job_lost(d, lost[d.id]) if d.id in lost else d for d in shown]


async def fleet_device(store: Store, device_id: str) -> Device | None:
    """One device as `fleet_devices` shows it."""
    device = await store.get_device(device_id)
    if device is None:
        return None
    if device.host not in await running_hosts(store, [device.host]):
        return _host_gone(device)
    lost = await _jobs_lost(store, [device])
    return _job_lost(device, lost[device.id]) if device.id in lost else device


def _host_gone(device: Device) -> Device:
    reason = f"its host {device.host!r} runs no labd (it last reported {device.state.value})"
    return device.model_copy(update={"state": DeviceState.OFFLINE, "reason": reason})


# A job ends, then its device is freed: a busy device whose job ended this long ago was not.
ENDED_LONG_AGO_S = 60.0


async def _jobs_lost(store: Store, devices: Iterable[Device]) -> dict[str, str]:
    """Busy devices whose host has lost their job, by device id, with what became of it: a host
    frozen (SIGSTOP, a stalled VM) or cut off from the database still holds its name, so
    its devices stayed busy with jobs another host had taken over: one job on two devices."""
    busy = {d.id: job for d in devices if (job := job_running_on(d)) is not None}
    if not busy:
        return {}
    query = sa.select(jobs.c.id, jobs.c.state, jobs.c.device_id, jobs.c.finished_at).where(
        jobs.c.id.in_(set(busy.values()))
    )
    rows = {row.id: row for row in await store.read(lambda conn: conn.execute(query).all())}
    now = store.clock.now()
    lost = {}
    for device_id, job_id in busy.items():
        row = rows.get(job_id)
        if row is None:
            lost[device_id] = f"its job {job_id!r} is not in the lab's database"
        elif row.state == JobState.QUEUED.value:
            lost[device_id] = f"its job {job_id!r} went back to the queue"
        elif row.state in ACTIVE_STATES and row.device_id != device_id:
            lost[device_id] = f"its job {job_id!r} moved to {row.device_id}"
        elif row.finished_at is not None and now - row.finished_at > ENDED_LONG_AGO_S:
            lost[device_id] = f"its job {job_id!r} ended ({row.state}) and the device was not freed"
    return lost


def _job_lost(device: Device, what: str) -> Device:
    reason = (
        f"its host {device.host!r} stopped renewing its lease ({what}): the host is frozen, "
        "stalled or cut off from the database"
    )
    return device.model_copy(update={"state": DeviceState.OFFLINE, "reason": reason})


def _hold_file(path: str) -> int | None:
    """An open descriptor holding an exclusive flock on the SQLite database `path` (None for
    an in-memory one); LabdError when another process holds it."""
    if not path or path == ":memory:":
        return None
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LabdError(
            f"another labd uses the database {path}: give each daemon a database of its own "
            "(SQLite), or share PostgreSQL under distinct daemon.host names"
        ) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd

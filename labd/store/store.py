"""The store: jobs, devices and raw iterations, in SQLite or PostgreSQL through the same code.

Every method is one short transaction, written as a function of a synchronous connection.
PostgreSQL runs it on the async engine; claiming work uses `SELECT ... FOR UPDATE SKIP LOCKED`
so several hosts can share one queue. SQLite (one host) runs it whole on a writer or a reader
thread, one hop from the event loop; writes begin IMMEDIATE, reads DEFERRED.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import structlog
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from labd.events import EventBus
from labd.store import notices, outbox
from labd.store.backup import backup_before_migrating
from labd.store.base import SqliteThread, StoreError
from labd.store.clock import LabClock
from labd.store.leases import Leases
from labd.store.migrations import LATEST, migrate
from labd.store.pruning import Pruning
from labd.store.records import Records
from labd.store.views import Views
from labd.tasks import Failures

log = structlog.get_logger("labd.store")


def default_sqlite_url(state_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{state_dir / 'labd.db'}"


def postgres_session(host: str) -> dict[str, Any]:
    """asyncpg's connection options naming the host in pg_stat_activity's application_name,
    so an administrator can tell (and end) one host's sessions; PostgreSQL keeps 63 bytes."""
    name = f"labd/{host}" if host else "labd"
    return {"server_settings": {"application_name": name.encode()[:63].decode(errors="ignore")}}


class Store(Leases, Pruning, Records, Views):
    """Async access to labd's database. Create with `await Store.open(url)`."""

    # How often a host without an MQTT bridge empties its outbox: the backlog stays small.
    DISCARD_EVERY_S = 5.0

    def __init__(
        self,
        engine: AsyncEngine,
        host: str = "",
        sqlite_thread: SqliteThread | None = None,
        bus: EventBus | None = None,
        clock: LabClock | None = None,
    ) -> None:
        self.engine = engine
        self.sqlite_thread = sqlite_thread  # SQLite's transactions (see StoreBase.write)
        self.dialect = engine.dialect.name
        self.host = host  # who delivers the outbox rows this store writes
        self.known_lanes: set[str] = set()
        self.bus = bus
        self.clock = clock or LabClock()

    @classmethod
    async def open(
        cls,
        url: str,
        host: str = "",
        bus: EventBus | None = None,
        local_time: Callable[[], float] = time.time,
    ) -> Store:
        """Connect, apply pending migrations, and return the store. The events of the changes
        it commits are published on `bus`. `local_time`: this host's clock (see LabClock)."""
        clock = LabClock(local_time)
        if url.startswith("sqlite"):
            if (database := sa.make_url(url).database) and database != ":memory:":
                await asyncio.to_thread(backup_before_migrating, Path(database), LATEST)
            # labd's own transactions run on SqliteThread's synchronous connections; the async
            # engine (no connection until used) is for tools and tests that want one.
            engine = create_async_engine(url, connect_args={"timeout": 30})
            _configure_sqlite(engine.sync_engine, writes=True)
            sync_url = engine.url.set(drivername="sqlite")
            writer, reader = (
                sa.create_engine(sync_url, connect_args={"timeout": 30}) for _ in range(2)
            )
            _configure_sqlite(writer, writes=True)
            # Reads begin DEFERRED: in WAL mode they see the last commit without taking the
            # write lock (a submit waited ~3x longer when every read took it too).
            _configure_sqlite(reader, writes=False)
            store = cls(engine, host, SqliteThread(writer, reader), bus, clock)
        else:
            engine = create_async_engine(
                url,
                pool_size=10,
                max_overflow=10,
                pool_pre_ping=True,
                connect_args=postgres_session(host),
            )
            store = cls(engine, host, bus=bus, clock=clock)
        try:
            applied = await store.write(migrate)
            await store.read_clock()
        except Exception as e:
            await store.close()
            raise StoreError(f"cannot open the store at {_safe_url(engine)}: {e}") from e
        if applied:
            log.info("store migrated", versions=applied, dialect=store.dialect)
        return store

    async def close(self) -> None:
        await self.engine.dispose()
        if self.sqlite_thread is not None:
            await asyncio.to_thread(self.sqlite_thread.close)

    async def discard_outbox(self) -> int:
        """Delete the events this host queued for its MQTT bridge; returns how many. For a
        host whose MQTT is disabled: nothing will deliver them (each host delivers only the
        rows it wrote), and kept they grow without end."""
        return int(await self.write(lambda conn: outbox.discard(conn, self.host)))

    async def discard_outbox_for_ever(self) -> None:
        """`discard_outbox` at once and every `DISCARD_EVERY_S` seconds, a database away
        waited out."""
        failures = Failures("discarding undeliverable outbox rows", log)
        said = False
        while True:
            try:
                dropped = await self.discard_outbox()
            except Exception as e:  # the database away: the next round tries again
                failures.failed(e)
            else:
                failures.succeeded()
                if dropped and not said:  # once: what an earlier run left, or the first rows
                    log.info("outbox rows discarded: MQTT is disabled on this host", rows=dropped)
                    said = True
            await asyncio.sleep(self.DISCARD_EVERY_S)

    async def read_clock(self) -> None:
        """Measure the database clock's offset from this host's (PostgreSQL; SQLite has one
        host, whose clock is the lab's)."""
        if self.dialect == "postgresql":
            await self.read(self.clock.read)

    async def follow_clock_for_ever(self) -> None:
        """`read_clock` every `LabClock.EVERY_S` seconds, a database away waited out (the
        last offset kept meanwhile)."""
        failures = Failures("reading the database's clock", log)
        while True:
            await asyncio.sleep(self.clock.EVERY_S)
            try:
                await self.read_clock()
            except Exception as e:
                failures.failed(e)
            else:
                failures.succeeded()

    async def follow_cancels(self, heard: Callable[[str], None]) -> None:
        """Call `heard(job_id)` as soon as any host asks to cancel a leased or running job, for
        ever (PostgreSQL; on SQLite the one host hears its own cancels directly)."""
        if self.dialect == "postgresql":
            await notices.follow_cancels(self.engine, heard, postgres_session(self.host))

    async def ping(self) -> str | None:
        """None when the database answers, else why not (for /readyz)."""
        try:
            await self.read(lambda conn: conn.execute(sa.text("SELECT 1")))
        except Exception as e:
            return f"database unreachable: {type(e).__name__}: {e}"
        return None


def _configure_sqlite(engine: sa.Engine, writes: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _: Any) -> None:
        # Take transaction control from the driver so that every transaction can BEGIN
        # IMMEDIATE: writers queue on the busy timeout instead of failing with "locked".
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")  # an acknowledged submit survives power loss
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


def _safe_url(engine: AsyncEngine) -> str:
    return engine.url.render_as_string(hide_password=True)

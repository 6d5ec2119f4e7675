"""Which host exports the lab-wide gauges.

Jobs by state and the queue are read from the shared database: every host sees the same
numbers, so if every host exported them a `sum` across hosts would multiply them. Exactly one
host of a lab exports them: the holder of a PostgreSQL session advisory lock. The lock lives
with the holder's connection, so when that host dies or loses the database another takes the
role at its next snapshot. No consensus of our own: the database decides. On SQLite the lab is
one host, which always exports.
"""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from labd.store import Store

log = structlog.get_logger("labd.metrics")

FLEET_LOCK = 0x1ABE  # PostgreSQL advisory lock key of the fleet exporter (migrations use 0x1ABD)


class FleetRole:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._conn: AsyncConnection | None = None

    async def held(self) -> bool:
        """True when this host exports the lab-wide gauges now (try to take the role if free)."""
        if self.store.dialect != "postgresql":
            return True
        try:
            if self._conn is not None:
                await self._conn.execute(sa.text("SELECT 1"))  # the lock lives while this does
                return True
            conn = await self.store.engine.connect()
            # Autocommit: a connection held open must not sit "idle in transaction".
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            got = await conn.scalar(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": FLEET_LOCK})
            if got:
                self._conn = conn
                log.info("this host exports the lab-wide gauges")
                return True
            await conn.close()
            return False
        except Exception as e:  # the database is away: whoever reaches it takes the role
            if self._conn is not None:  # said once; the snapshot's failures say the rest
                log.warning("fleet exporter role lost", error=repr(e))
            await self.release()
            return False

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()  # closing also ends the session, and its lock

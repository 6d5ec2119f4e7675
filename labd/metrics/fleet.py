"""Which host exports the lab-wide gauges.

Jobs by state and the queue are read from the shared database: every host sees the same
numbers, so if every host exported them a `sum` across hosts would multiply them. Exactly one
host of a lab exports them: the holder of a PostgreSQL session advisory lock. The lock lives
with the holder's connection, so when that host dies or loses the database another takes the
role at its next snapshot. No consensus of our own: the database decides. On SQLite the lab is
one host, which always exports.
"""

from __future__ import annotations

import structlog

from labd.store import SessionLock, Store

log = structlog.get_logger("labd.metrics")

FLEET_LOCK = 0x1ABE  # PostgreSQL advisory lock key of the fleet exporter (migrations use 0x1ABD)


class FleetRole:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = SessionLock(store, FLEET_LOCK)

    async def held(self) -> bool:
        """True when this host exports the lab-wide gauges now (try to take the role if free)."""
        if self.store.dialect != "postgresql":
            return True
        was = self._lock.held
        try:
            got = await self._lock.hold()
        except Exception as e:  # the database is away: whoever reaches it takes the role
            if was:  # said once; the snapshot's failures say the rest
                log.warning("fleet exporter role lost", error=repr(e))
            return False
        if got and not was:
            log.info("this host exports the lab-wide gauges")
        return got

    async def release(self) -> None:
        await self._lock.release()

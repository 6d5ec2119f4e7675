"""A PostgreSQL session advisory lock, held by a connection kept open for it: it lives while
that connection does, and goes with its holder (a host that dies, a database restart). The
fleet exporter's role and a host's name are held this way."""

from __future__ import annotations

import contextlib

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from labd.store.store import Store


class SessionLock:
    def __init__(self, store: Store, key: int) -> None:
        self.store, self.key = store, key
        self._conn: AsyncConnection | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    async def hold(self) -> bool:
        """True while held (checked on its connection) or just taken; False while another
        session holds it. Raises when the database does not answer, and lets go."""
        try:
            if self._conn is not None:
                await self._conn.execute(sa.text("SELECT 1"))  # the lock lives while this does
                return True
            conn = await self.store.engine.connect()
            try:
                # Autocommit: a connection held open must not sit "idle in transaction".
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
                got = await conn.scalar(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": self.key})
            except BaseException:
                await conn.invalidate()
                raise
            if not got:
                await conn.close()
                return False
            self._conn = conn
            return True
        except Exception:
            await self.release()
            raise

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.invalidate()  # closing also ends the session, and its lock

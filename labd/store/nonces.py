"""The ledger of signed-message nonces: each (principal, nonce) is acted on once per host."""

from __future__ import annotations

import time

import sqlalchemy as sa

from labd.store.base import StoreBase
from labd.store.tables import auth_nonces

PURGE_EVERY = 200  # first-uses between two sweeps of expired nonces


class NonceSeen(Exception):
    """This host already acted on the message with this nonce."""


def record_nonce(
    conn: sa.Connection, host: str, principal: str, nonce: str, expires_at: float
) -> None:
    """Record a nonce in the caller's transaction; NonceSeen (the transaction is rolled back
    by the caller) when it is there already."""
    key = (
        (auth_nonces.c.host == host)
        & (auth_nonces.c.principal == principal)
        & (auth_nonces.c.nonce == nonce)
    )
    if conn.scalar(sa.select(auth_nonces.c.expires_at).where(key)) is not None:
        raise NonceSeen(nonce)
    conn.execute(
        auth_nonces.insert().values(
            host=host, principal=principal, nonce=nonce, expires_at=expires_at
        )
    )


class Nonces(StoreBase):
    _nonce_uses = 0

    async def first_use(
        self, principal: str, nonce: str, expires_at: float, now: float | None = None
    ) -> bool:
        """Record the nonce; True the first time, False when this host has seen it (a replay,
        or the broker delivering again what was already acted on)."""
        now = time.time() if now is None else now
        self._nonce_uses += 1
        purge = self._nonce_uses % PURGE_EVERY == 1

        def record(conn: sa.Connection) -> None:
            if purge:
                conn.execute(auth_nonces.delete().where(auth_nonces.c.expires_at < now))
            record_nonce(conn, self.host, principal, nonce, expires_at)

        try:
            await self.write(record)
        except (NonceSeen, sa.exc.IntegrityError):
            return False  # seen, or another connection of this host recorded it first
        return True

    async def nonce_seen(self, principal: str, nonce: str) -> bool:
        """Whether this host has acted on the nonce (a read: no commit, no fsync)."""
        key = (
            (auth_nonces.c.host == self.host)
            & (auth_nonces.c.principal == principal)
            & (auth_nonces.c.nonce == nonce)
        )
        query = sa.select(auth_nonces.c.expires_at).where(key)
        return await self.read(lambda conn: conn.scalar(query)) is not None

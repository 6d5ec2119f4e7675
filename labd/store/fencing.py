"""Fencing: a write for a leased job is taken only with the job's current lease token.

A host can freeze (a GC pause, a suspended VM, SIGSTOP) past its lease while another host
takes the job over; when it wakes it still believes it owns the job. Every write it makes for
the job names its token, and the store refuses the write once the token has moved on, so the
late host cannot write over its successor (Kleppmann's fencing tokens; the token changes at
every claim, requeue and expiry).
"""

from __future__ import annotations

import sqlalchemy as sa

from labd.store.base import StoreError
from labd.store.tables import ACTIVE_STATES, jobs


class LeaseLost(StoreError):
    """The job's lease moved on (expired and taken back, or claimed by another host)."""


# A no-op UPDATE of the job's own row: it matches only while the token holds, and on
# PostgreSQL it locks the row to the end of the transaction, so no takeover can slip between
# the check and the write it guards.
_FENCE = (
    jobs.update()
    .where(
        jobs.c.id == sa.bindparam("fence_job"),
        jobs.c.lease_token == sa.bindparam("fence_token"),
        jobs.c.state.in_(ACTIVE_STATES),
    )
    .values(lease_token=jobs.c.lease_token)
)


def fence(conn: sa.Connection, job_id: str, token: str) -> None:
    """Raise LeaseLost unless `token` still holds `job_id`'s lease (in the caller's
    transaction, before its writes)."""
    if conn.execute(_FENCE, {"fence_job": job_id, "fence_token": token}).rowcount != 1:
        raise LeaseLost(f"job {job_id}: the lease this host held has moved on")

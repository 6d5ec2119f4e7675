"""The database's retention: what ended jobs leave behind, removed in two steps.

Raw iterations go first (they are nearly all of a job's size) and a digest stays: the summary
its results showed and its point of the test's history. Whole jobs go later, if at all. Every
step is idempotent, so hosts sharing one PostgreSQL database may prune at once without a lock:
the first digest written wins and deleting what is gone deletes nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from labd.model import TERMINAL, Job
from labd.store.base import StoreBase, row_to_job
from labd.store.tables import iterations, job_digests, jobs

_ENDED = tuple(state.value for state in TERMINAL)


class Pruning(StoreBase):
    """Finding ended jobs past a limit, keeping their digests, removing what they held."""

    async def ended_with_raw_values(
        self, before: float, limit: int, skip: Collection[str] = ()
    ) -> list[Job]:
        """Up to `limit` jobs that ended before `before` (lab time), oldest first, whose raw
        iterations are still stored, except those in `skip`."""
        query = (
            sa.select(jobs)
            .where(
                jobs.c.state.in_(_ENDED),
                jobs.c.finished_at < before,
                sa.exists().where(iterations.c.job_id == jobs.c.id),
                ~sa.exists().where(job_digests.c.job_id == jobs.c.id),
                jobs.c.id.not_in(list(skip)),
            )
            .order_by(jobs.c.finished_at)
            .limit(limit)
        )
        return await self.read(lambda conn: [row_to_job(r) for r in conn.execute(query)])

    async def keep_digest(
        self, job_id: str, digest: dict[str, Any], history: dict[str, Any]
    ) -> int:
        """Store the job's digest and remove its raw iterations, in one transaction; returns
        how many were removed (0: another host had done it)."""
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        count = sa.select(sa.func.count()).where(iterations.c.job_id == job_id)
        remove = iterations.delete().where(iterations.c.job_id == job_id)
        now = self.clock.now()

        def keep(conn: sa.Connection) -> int:
            removed = int(conn.scalar(count) or 0)
            row = dict(
                job_id=job_id, digest=digest, history=history, iterations=removed, removed_at=now
            )
            written = conn.execute(
                insert(job_digests).values(**row).on_conflict_do_nothing(index_elements=["job_id"])
            )
            if not written.rowcount:
                return 0
            conn.execute(remove)
            return removed

        return await self.write(keep)

    async def job_digest(self, job_id: str) -> dict[str, Any] | None:
        """What retention kept of the job: `digest`, `iterations` (how many were removed) and
        `removed_at` (lab time); None while its raw iterations are stored."""
        query = sa.select(
            job_digests.c.digest, job_digests.c.iterations, job_digests.c.removed_at
        ).where(job_digests.c.job_id == job_id)
        row = await self.read(lambda conn: conn.execute(query).first())
        if row is None:
            return None
        return {"digest": row.digest, "iterations": row.iterations, "removed_at": row.removed_at}

    async def forget_ended(self, before: float, limit: int) -> list[str]:
        """Delete up to `limit` jobs that ended before `before`, oldest first, with their
        iterations and digests; returns their ids."""
        chosen = (
            sa.select(jobs.c.id)
            .where(jobs.c.state.in_(_ENDED), jobs.c.finished_at < before)
            .order_by(jobs.c.finished_at)
            .limit(limit)
        )

        def forget(conn: sa.Connection) -> list[str]:
            ids = list(conn.scalars(chosen))
            if ids:
                conn.execute(iterations.delete().where(iterations.c.job_id.in_(ids)))
                conn.execute(job_digests.delete().where(job_digests.c.job_id.in_(ids)))
                conn.execute(jobs.delete().where(jobs.c.id.in_(ids)))
            return ids

        return await self.write(forget)

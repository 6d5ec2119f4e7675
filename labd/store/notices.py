"""Word between hosts that share PostgreSQL: a cancel asked on one host reaches the host that
runs the job at once (LISTEN/NOTIFY), not at that host's next heartbeat.

A notice only makes the holder renew its lease now; the renewal reads the cancel from the job's
row, which stays the truth. So a notice lost while the listener was away costs nothing but
time (the next heartbeat sees the cancel), and a notice for a job that is not held here does
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from labd.tasks import Failures

log = structlog.get_logger("labd.store")

CANCELS = "labd_cancel"
CHECK_EVERY_S = 30.0  # a connection dropped without a word is found by using it
RETRY_S = 5.0


def notify_cancel(conn: sa.Connection, job_id: str) -> None:
    """Tell every host listening that `job_id` is to be cancelled; sent when `conn`'s
    transaction commits, not before (so never for a cancel that was rolled back)."""
    conn.execute(
        sa.text("SELECT pg_notify(:channel, :job_id)"), {"channel": CANCELS, "job_id": job_id}
    )


async def follow_cancels(
    engine: AsyncEngine, heard: Callable[[str], None], options: dict[str, Any]
) -> None:
    """Call `heard(job_id)` for every cancel notified, for ever, on a connection of its own
    (a pooled one would go back to the pool and stop listening); reconnects when it is lost.
    `options`: asyncpg's connection options beyond the URL's (the session's name)."""
    import asyncpg  # installed with labd[postgres], as the engine's driver

    args, kwargs = engine.dialect.create_connect_args(engine.url)
    kwargs = {**kwargs, **options}
    failures = Failures("listening for cancels from other hosts", log)
    while True:
        try:
            conn = await asyncpg.connect(*args, **kwargs)
        except Exception as e:
            failures.failed(e)
            await asyncio.sleep(RETRY_S)
            continue
        try:
            await _listen(conn, heard, failures)
        except Exception as e:
            failures.failed(e)
            await asyncio.sleep(RETRY_S)
        finally:
            with contextlib.suppress(Exception):
                await conn.close(timeout=1)


async def _listen(conn: Any, heard: Callable[[str], None], failures: Failures) -> None:
    lost = asyncio.Event()
    conn.add_termination_listener(lambda _: lost.set())
    await conn.add_listener(CANCELS, lambda _conn, _pid, _channel, job_id: heard(job_id))
    failures.succeeded()
    while not lost.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(lost.wait(), CHECK_EVERY_S)
            break
        await conn.fetchval("SELECT 1", timeout=CHECK_EVERY_S)
    raise ConnectionError("the listening connection was closed")

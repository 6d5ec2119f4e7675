"""Cancels reach the other hosts of a PostgreSQL lab as notices, and keep reaching them after
the listening connection is lost."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from labd.store import Store, notices
from tests.integration.store.test_store import LANE, spec

SPEC = spec()


async def leased_then_cancelled(runner: Store, other: Store, job_id: str) -> None:
    await other.submit_job(job_id, SPEC, "ci")
    assert await runner.claim_job(f"d-{job_id}", [LANE], "a", ttl=30) is not None
    await other.request_cancel(job_id)


async def test_a_cancel_is_heard_by_the_other_host_even_after_its_connection_was_cut(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notices, "RETRY_S", 0.2)
    a = await Store.open(postgres_url, host="a")
    b = await Store.open(postgres_url, host="b")
    heard: asyncio.Queue[str] = asyncio.Queue()
    listening = asyncio.create_task(a.follow_cancels(heard.put_nowait))
    try:
        await asyncio.sleep(0.5)  # the listener connects
        await b.submit_job("queued", SPEC, "ci")
        await b.request_cancel("queued")  # cancelled in the queue: no host to tell
        await leased_then_cancelled(a, b, "first")
        assert await asyncio.wait_for(heard.get(), 5) == "first"
        # Every other connection to the database is cut, the listener's among them.
        await b.write(
            lambda conn: conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        )
        await asyncio.sleep(1)  # it reconnects
        await leased_then_cancelled(a, b, "second")
        assert await asyncio.wait_for(heard.get(), 5) == "second"
        assert heard.empty()
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await a.close()
        await b.close()


async def test_sqlite_has_no_other_host_to_hear(tmp_path: object) -> None:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path}/labd.db")
    try:
        await asyncio.wait_for(store.follow_cancels(lambda _: None), 1)  # returns at once
    finally:
        await store.close()


async def test_each_hosts_sessions_are_named_in_pg_stat_activity(postgres_url: str) -> None:
    """Seven sessions a host, all with an empty application_name: ending one host's meant
    matching client ports against `ss -tnp`."""
    a = await Store.open(postgres_url, host="rack-a")
    b = await Store.open(postgres_url, host="rack-b")
    listening = asyncio.create_task(a.follow_cancels(lambda _: None))
    try:
        await asyncio.sleep(0.5)  # the listener connects

        def names(conn: sa.Connection) -> list[str]:
            rows = conn.execute(
                sa.text(
                    "SELECT application_name FROM pg_stat_activity "
                    "WHERE datname = current_database() ORDER BY 1"
                )
            )
            return [row[0] for row in rows]

        seen = await b.read(names)
        assert "labd/rack-b" in seen  # this query's own session
        assert seen.count("labd/rack-a") >= 2  # the pool's and the cancel listener's
        assert set(seen) == {"labd/rack-a", "labd/rack-b"}
    finally:
        listening.cancel()
        await a.close()
        await b.close()

"""A PostgreSQL database an administrator pauses (no new connections, sessions ended) is a
database away for a moment, waited out: never an error that ends a job as a driver bug."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from labd.store import Store, blips, database_blip, outlasting, passing

ADMIN = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}


async def admin(sql: str) -> None:
    conn = await asyncpg.connect(**ADMIN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def pause(name: str) -> None:
    await admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    await admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")


async def test_a_paused_database_is_waited_out(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blips, "FIRST_WAIT_S", 0.1)
    name = postgres_url.rsplit("/", 1)[1]
    store = await Store.open(postgres_url)
    try:
        await pause(name)
        try:
            errors: list[Exception] = []
            while len(errors) < 5 and "accepting connections" not in str(errors[-1:]):
                try:  # the pooled connection's end first, then the refusal to connect
                    await store.get_job("x")
                except Exception as e:
                    errors.append(e)
            assert 'database "' in str(errors[-1]) and "accepting connections" in str(errors[-1])
            for error in errors:
                assert passing(error) and database_blip(error), error
            waited = asyncio.ensure_future(
                outlasting(lambda: store.get_job("x"), "reading a job", within=10)
            )
            await asyncio.sleep(0.5)
            assert not waited.done()
        finally:
            await admin(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        assert await asyncio.wait_for(waited, 10) is None
    finally:
        await store.close()

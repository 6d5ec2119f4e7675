"""The API answers a full disk or a lost database with a 503 that says which, not a bare 500
(an independent tester's submission on a full state directory got `500 Internal Server Error`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from labd.daemon.api import store_unavailable
from labd.store import StoreError
from tests.unit.store.test_space import sqlite_full_error


async def answer(raising: Callable[[], Exception]) -> tuple[int, dict[str, object] | str]:
    async def handler(request: web.Request) -> web.Response:
        raise raising()

    app = web.Application(middlewares=[store_unavailable])
    app.router.add_post("/api/v1/jobs", handler)
    async with TestClient(TestServer(app)) as client:
        response = await client.post("/api/v1/jobs", json={})
        if response.content_type == "application/json":
            return response.status, await response.json()
        return response.status, await response.text()


async def test_a_full_database_is_a_503_naming_the_disk(tmp_path: Path) -> None:
    full = await sqlite_full_error(tmp_path / "full.db")
    status, body = await answer(lambda: full)
    assert status == 503
    assert isinstance(body, dict) and body["reason"] == "unavailable"
    assert body["errors"] == [
        "labd's disk is full (its database or state directory); nothing was done, send it again"
    ]


async def test_a_lost_database_is_a_503_and_a_bug_stays_a_500() -> None:
    # What asyncpg raises, unwrapped, when PostgreSQL is down (a tester got a bare 500).
    refused = OSError(111, "Connect call failed ('127.0.0.1', 5432)")
    for error in (StoreError("connection refused"), refused):
        status, body = await answer(lambda error=error: error)
        assert status == 503 and isinstance(body, dict)
        assert body["errors"] == [
            "the lab's database is unreachable; nothing was done, send it again"
        ]
    status, _ = await answer(lambda: KeyError("a bug"))
    assert status == 500

"""A bound on heavy queries (results, history, artefact listings): a few run at once, a few
more wait, the rest are told to come back, so a burst of them cannot take the daemon's memory
or its loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from labd.stats import json_text

RETRY_AFTER_S = 2


class Busy(Exception):
    """Too many heavy queries are running and waiting."""


class HeavyQueries:
    def __init__(self, running: int, waiting: int) -> None:
        self._slots = asyncio.Semaphore(running)
        self._max_waiting = waiting
        self._waiting = 0

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold one of the slots for the block; Busy when every slot and queue place is taken."""
        if self._slots.locked() and self._waiting >= self._max_waiting:
            raise Busy
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._slots.release()


async def heavy_answer(
    heavy: HeavyQueries, view: Callable[[], Awaitable[dict[str, Any]]]
) -> web.Response:
    """A heavy answer: computed in its turn, encoded off the event loop; 503 with Retry-After
    when it cannot have a turn."""
    try:
        async with heavy.turn():
            body = await asyncio.to_thread(_encode, await view())
    except Busy:
        return web.json_response(
            {"errors": ["too many results, history and artefact queries at once; retry shortly"]},
            status=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return web.Response(body=body, content_type="application/json")


def _encode(data: Any) -> bytes:
    """Strict JSON: a NaN or infinity (an older stored record's) as null (labd.stats.json_text)."""
    return json_text(data).encode()

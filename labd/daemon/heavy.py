"""A bound on heavy queries (results, history, artefact listings): a few run at once, a few
more wait, the rest are told to come back, so a burst of them cannot take the daemon's memory
or its loop."""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import web

from labd.stats import json_text

RETRY_AFTER_S = 2


class Busy(Exception):
    """Too many heavy queries are running and waiting (all of them, or the caller's own)."""


class HeavyQueries:
    """`running` at once, `waiting` more in line; one principal holds at most half the places
    (running and waiting), so a burst from one viewer leaves the others theirs."""

    def __init__(self, running: int, waiting: int) -> None:
        self._slots = asyncio.Semaphore(running)
        self._max_waiting = waiting
        self._waiting = 0
        self.share = max(1, (running + waiting) // 2)
        self._held: collections.Counter[str] = collections.Counter()  # principal -> places

    @contextlib.asynccontextmanager
    async def turn(self, who: str) -> AsyncIterator[None]:
        """Hold one of the slots for the block; Busy when every slot and queue place is taken,
        or `who` holds its share of them already."""
        if self._held[who] >= self.share:
            raise Busy(
                f"{who} has {self.share} results, history and artefact queries running or "
                "waiting, its share of them; retry once one has been answered"
            )
        if self._slots.locked() and self._waiting >= self._max_waiting:
            raise Busy("too many results, history and artefact queries at once; retry shortly")
        self._held[who] += 1
        try:
            self._waiting += 1
            try:
                await self._slots.acquire()
            finally:
                self._waiting -= 1
            try:
                yield
            finally:
                self._slots.release()
        finally:
            self._held[who] -= 1
            if not self._held[who]:
                del self._held[who]


async def heavy_answer(
    heavy: HeavyQueries, who: str, view: Callable[[], Awaitable[dict[str, Any]]]
) -> web.Response:
    """A heavy answer for principal `who`: computed in its turn, encoded off the event loop;
    503 with Retry-After when it cannot have a turn."""
    try:
        async with heavy.turn(who):
            body = await asyncio.to_thread(_encode, await view())
    except Busy as e:
        return web.json_response(
            {"errors": [str(e)]},
            status=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )
    return web.Response(body=body, content_type="application/json")


def _encode(data: Any) -> bytes:
    """Strict JSON: a NaN or infinity (an older stored record's) as null (labd.stats.json_text)."""
    return json_text(data).encode()

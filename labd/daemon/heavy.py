"""A bound on heavy queries (results, history): a few run at once, a few more wait, the rest
are told to come back, so a burst of them cannot take the daemon's memory or its loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

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

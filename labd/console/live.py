"""Live progress for the console: the event bus as server-sent events (one small stream per
open page, bounded; a slow browser loses its oldest events like any bus subscriber)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

from labd.events import (
    Event,
    EventBus,
    IterationDone,
    JobFinished,
    JobLeased,
    JobStarted,
    Subscription,
)

MAX_STREAMS = 32
KEEP_ALIVE_S = 15.0
STREAM_QUEUE = 256


def message(event: Event) -> bytes | None:
    """The event as one server-sent event, or None for a kind the console does not show."""
    data: dict[str, Any]
    if isinstance(event, IterationDone):
        name, data = "iteration", {"job": event.job_id, "done": event.index + 1}
    elif isinstance(event, JobStarted):
        name, data = "started", {"job": event.job_id, "total": event.total_iterations}
    elif isinstance(event, JobLeased):
        name, data = "leased", {"job": event.job_id, "device": event.device_id}
    elif isinstance(event, JobFinished):
        name, data = "finished", {"job": event.job_id, "state": event.state}
    else:
        return None
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class LiveFeed:
    """GET /console/live: job progress as it happens."""

    def __init__(self, bus: EventBus, headers: dict[str, str]) -> None:
        self.bus, self.headers = bus, headers
        self.streams: set[Subscription] = set()
        self._ids = itertools.count(1)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        if len(self.streams) >= MAX_STREAMS:
            raise web.HTTPServiceUnavailable(
                text=f"{MAX_STREAMS} live pages are open already; reload later\n",
                headers={"Retry-After": "30"},
            )
        sub = self.bus.subscribe(
            f"console-live-{next(self._ids)}",
            IterationDone,
            JobStarted,
            JobLeased,
            JobFinished,
            maxsize=STREAM_QUEUE,
        )
        self.streams.add(sub)
        response = web.StreamResponse(
            headers={
                **self.headers,
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
            }
        )
        try:
            await response.prepare(request)
            await response.write(b"retry: 3000\n\n")
            while True:
                try:
                    async with asyncio.timeout(KEEP_ALIVE_S):
                        event = await sub.get()
                except TimeoutError:
                    await response.write(b": still here\n\n")
                    continue
                if event is None:  # closed: the daemon is stopping
                    break
                if (text := message(event)) is not None:
                    await response.write(text)
        except ConnectionResetError:
            pass  # the page was closed
        finally:
            self.streams.discard(sub)
            self.bus.unsubscribe(sub)
        return response

    async def close_all(self, _: web.Application) -> None:
        """End every stream (on shutdown: the server would wait for them otherwise)."""
        for sub in list(self.streams):
            self.bus.unsubscribe(sub)

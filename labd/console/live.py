"""Live progress for the console: the event bus as server-sent events (one small stream per
open page, bounded; a slow browser loses its oldest events like any bus subscriber).

A stream lives only as long as the session that opened it: signing out ends it at once, an
expired session at the next keep-alive. One principal holds only a few of the streams (a new
one ends its oldest), so one viewer cannot take every slot.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

from labd.console.access import Sessions, cookie_name
from labd.daemon.guard import CALLER
from labd.events import (
    Event,
    EventBus,
    IterationDone,
    JobFinished,
    JobLeased,
    JobStarted,
    Subscription,
)
from labd.store import Store

MAX_STREAMS = 32
MAX_STREAMS_PER_PRINCIPAL = 4  # a person's few open pages; more is a tab hoarder or a script
MAX_JOBS = 100  # jobs a page may ask the current state of when its stream opens
KEEP_ALIVE_S = 15.0
STREAM_QUEUE = 256
ENDED = b"event: ended\ndata: {}\n\n"


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

    def __init__(
        self, bus: EventBus, store: Store, sessions: Sessions, headers: dict[str, str]
    ) -> None:
        self.bus, self.store, self.sessions, self.headers = bus, store, sessions, headers
        self.streams: dict[Subscription, tuple[str, str]] = {}  # -> (session id, principal)
        self._ids = itertools.count(1)
        self._stopping = False
        sessions.on_close.append(self._session_closed)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        sid = request.cookies.get(cookie_name(request), "")
        principal = request[CALLER].principal.name
        own = [sub for sub, (_, who) in self.streams.items() if who == principal]
        if len(own) >= MAX_STREAMS_PER_PRINCIPAL:
            # The principal's oldest stream ends: most likely a page closed or reloaded that
            # the server has not noticed yet (it learns at the next write).
            del self.streams[own[0]]
            self.bus.unsubscribe(own[0])
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
        self.streams[sub] = (sid, principal)
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
            # Subscribed first, then where the page's jobs stand now: what happened between
            # the page's rendering and this stream is not lost.
            for job_id in request.query.getall("job", [])[:MAX_JOBS]:
                if (text := await self._now(job_id)) is not None:
                    await response.write(text)
            while True:
                try:
                    async with asyncio.timeout(KEEP_ALIVE_S):
                        event = await sub.get()
                except TimeoutError:
                    if not self.sessions.alive(sid):  # expired while the page stayed open
                        break
                    await response.write(b": still here\n\n")
                    continue
                # None: the daemon is stopping or the session ended (events queued before
                # a sign-out are not sent after it either).
                if event is None or not self.sessions.alive(sid):
                    break
                if (text := message(event)) is not None:
                    await response.write(text)
            if not self._stopping:  # the page stops rather than reconnect (live.js)
                await response.write(ENDED)
        except ConnectionResetError:
            pass  # the page was closed
        finally:
            self.streams.pop(sub, None)
            self.bus.unsubscribe(sub)
        return response

    async def _now(self, job_id: str) -> bytes | None:
        job = await self.store.get_job(job_id)
        if job is None:
            return None
        if job.state.terminal:
            data: dict[str, Any] = {"job": job.id, "state": job.state.value}
            return f"event: finished\ndata: {json.dumps(data)}\n\n".encode()
        done = await self.store.count_iterations(job.id, job.attempts)
        data = {"job": job.id, "done": done}
        return f"event: iteration\ndata: {json.dumps(data)}\n\n".encode()

    def _session_closed(self, sid: str) -> None:
        """End the streams of a session that ended (signed out, expired, pushed out)."""
        for sub, (owner, _) in list(self.streams.items()):
            if owner == sid:
                self.bus.unsubscribe(sub)

    async def close_all(self, _: web.Application) -> None:
        """End every stream (on shutdown: the server would wait for them otherwise)."""
        self._stopping = True  # the pages reconnect to the next daemon
        for sub in list(self.streams):
            self.bus.unsubscribe(sub)

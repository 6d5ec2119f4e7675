"""The in-process event bus: publishers never wait, each subscriber has its own bounded queue.

A subscriber that falls behind loses its oldest events (the newest state matters most to
every sink labd has); each loss is counted per subscriber and logged, never silent.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import structlog

from labd.events.types import Event

log = structlog.get_logger("labd.events")

DROP_LOG_INTERVAL = 1.0  # seconds between overflow warnings for one subscriber


class Subscription:
    """A subscriber's view of the bus: an async iterator over the events it asked for."""

    def __init__(self, name: str, types: tuple[type[Event], ...], maxsize: int) -> None:
        self.name = name
        self.types = types
        self.delivered = 0
        self.dropped = 0
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize)
        self._dropped_unreported = 0
        self._last_drop_log = 0.0

    def wants(self, event: Event) -> bool:
        return not self.types or isinstance(event, self.types)

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    def _offer(self, event: Event | None) -> None:
        while True:
            try:
                self._queue.put_nowait(event)
                return
            except asyncio.QueueFull:
                self._queue.get_nowait()
                self._count_drop()

    def _count_drop(self) -> None:
        self.dropped += 1
        self._dropped_unreported += 1
        now = time.monotonic()
        if now - self._last_drop_log >= DROP_LOG_INTERVAL:
            log.warning(
                "event subscriber overflowed; oldest events dropped",
                subscriber=self.name,
                dropped=self._dropped_unreported,
                dropped_total=self.dropped,
                queue_size=self._queue.maxsize,
            )
            self._dropped_unreported = 0
            self._last_drop_log = now

    async def get(self) -> Event | None:
        """The next event, or None once the subscription is closed and drained."""
        event = await self._queue.get()
        if event is not None:
            self.delivered += 1
        return event

    def get_nowait(self) -> Event | None:
        """The next queued event without waiting, or None if there is none."""
        try:
            event = self._queue.get_nowait()
        except asyncio.QueueEmpty:
            return None
        if event is not None:
            self.delivered += 1
        return event

    async def __aiter__(self) -> AsyncIterator[Event]:
        while (event := await self.get()) is not None:
            yield event


@dataclass(frozen=True)
class SubscriberStats:
    name: str
    delivered: int
    dropped: int
    depth: int


class EventBus:
    """Fan-out of typed events to subscribers; `publish` is synchronous and never blocks."""

    def __init__(self, queue_size: int = 10_000) -> None:
        self.queue_size = queue_size
        self.published: Counter[str] = Counter()
        self._subscriptions: list[Subscription] = []

    def subscribe(self, name: str, *types: type[Event], maxsize: int | None = None) -> Subscription:
        """A new subscription to `types` (all events when none are given)."""
        if any(s.name == name for s in self._subscriptions):
            raise ValueError(f"an event subscriber named {name!r} already exists")
        sub = Subscription(name, types, maxsize or self.queue_size)
        self._subscriptions.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Close sub: its iterator ends after the events already queued."""
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)
            sub._offer(None)

    def publish(self, event: Event) -> None:
        """Queue event for every interested subscriber, dropping their oldest if full."""
        self.published[event.kind] += 1
        for sub in self._subscriptions:
            if sub.wants(event):
                sub._offer(event)

    def stats(self) -> list[SubscriberStats]:
        return [
            SubscriberStats(s.name, s.delivered, s.dropped, s.depth) for s in self._subscriptions
        ]


Handler = Callable[[Event], Awaitable[None]]


async def dispatch(sub: Subscription, handler: Handler) -> None:
    """Feed every event of sub to handler; a failing handler is logged and the loop goes on."""
    async for event in sub:
        try:
            await handler(event)
        except Exception:
            log.exception("event handler failed", subscriber=sub.name, event_kind=event.kind)

from __future__ import annotations

import asyncio
import logging

import pytest

from labd.events import ConfigRejected, DaemonStarted, EventBus, dispatch
from labd.logs import configure_logging


def started(n: int) -> DaemonStarted:
    return DaemonStarted(host=f"h{n}", version="x")


async def test_subscriber_gets_only_the_kinds_it_asked_for() -> None:
    bus = EventBus()
    only_started = bus.subscribe("a", DaemonStarted)
    everything = bus.subscribe("b")
    bus.publish(started(1))
    bus.publish(ConfigRejected(problems=["p"]))
    assert only_started.depth == 1 and everything.depth == 2
    event = await only_started.get()
    assert isinstance(event, DaemonStarted) and event.kind == "daemon_started"


async def test_slow_subscriber_loses_oldest_events_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Publishing never waits: a full queue drops its oldest event and says so."""
    configure_logging("info", "json")
    bus = EventBus(queue_size=3)
    slow = bus.subscribe("slow")
    fast = bus.subscribe("fast", maxsize=100)
    with caplog.at_level(logging.WARNING):
        for n in range(10):
            bus.publish(started(n))
    assert [s.dropped for s in bus.stats()] == [7, 0]
    kept = [slow.get_nowait() for _ in range(3)]
    assert [e.host for e in kept if isinstance(e, DaemonStarted)] == ["h7", "h8", "h9"]
    assert fast.depth == 10
    assert "event subscriber overflowed" in caplog.text and "slow" in caplog.text


async def test_unsubscribe_ends_the_iterator_after_queued_events() -> None:
    bus = EventBus()
    sub = bus.subscribe("s")
    bus.publish(started(1))
    bus.unsubscribe(sub)
    bus.publish(started(2))
    assert [e.host for e in [ev async for ev in sub] if isinstance(e, DaemonStarted)] == ["h1"]


async def test_duplicate_subscriber_name_is_refused() -> None:
    bus = EventBus()
    bus.subscribe("s")
    with pytest.raises(ValueError, match="'s' already exists"):
        bus.subscribe("s")


async def test_failing_handler_is_logged_and_the_next_event_still_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus = EventBus()
    sub = bus.subscribe("flaky")
    seen: list[str] = []

    async def handler(event: object) -> None:
        assert isinstance(event, DaemonStarted)
        if event.host == "h1":
            raise RuntimeError("boom")
        seen.append(event.host)

    for n in (1, 2):
        bus.publish(started(n))
    bus.unsubscribe(sub)
    with caplog.at_level(logging.ERROR):
        await asyncio.wait_for(dispatch(sub, handler), 5)
    assert seen == ["h2"]
    assert "event handler failed" in caplog.text

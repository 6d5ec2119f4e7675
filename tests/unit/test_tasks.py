"""Supervised loops: a crash restarts the loop after a backoff, and the bus hears it was down
and, once it has run a while again, that it is up; cancellation still stops it."""

from __future__ import annotations

import asyncio

import pytest

import labd.tasks
from labd.events import ComponentDown, ComponentUp, EventBus
from labd.tasks import TaskSet


async def test_a_crashing_loop_is_restarted_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labd.tasks, "BACKOFF_FIRST_S", 0.01)
    monkeypatch.setattr(labd.tasks, "HEALTHY_AFTER_S", 0.2)
    bus = EventBus()
    heard = bus.subscribe("test", ComponentDown, ComponentUp)
    runs = 0

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise RuntimeError(f"boom {runs}")
        await asyncio.sleep(3600)

    tasks = TaskSet("unit")
    tasks.supervise("loop", loop, bus)
    events = [await asyncio.wait_for(heard.get(), 5) for _ in range(3)]
    assert [type(e).__name__ for e in events] == ["ComponentDown", "ComponentDown", "ComponentUp"]
    first, second, up = events
    assert isinstance(first, ComponentDown) and first.component == "unit:loop"
    assert first.error == "RuntimeError: boom 1" and second.error == "RuntimeError: boom 2"
    assert second.retry_in_s > first.retry_in_s * 1.2  # the backoff grows
    assert isinstance(up, ComponentUp) and runs == 3
    await tasks.cancel_all()
    assert len(tasks) == 0


async def test_a_loop_that_returns_is_restarted_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(labd.tasks, "BACKOFF_FIRST_S", 0.01)
    bus = EventBus()
    heard = bus.subscribe("test", ComponentDown)
    runs = 0

    async def loop() -> None:
        nonlocal runs
        runs += 1

    tasks = TaskSet("unit")
    tasks.supervise("quitter", loop, bus)
    down = await asyncio.wait_for(heard.get(), 5)
    assert isinstance(down, ComponentDown) and down.error == "ended unexpectedly"
    await asyncio.wait_for(heard.get(), 5)
    assert runs >= 2
    await tasks.cancel_all()

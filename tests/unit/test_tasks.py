"""Supervised loops: a crash restarts the loop after a backoff, and the bus hears it was down
and, once it has run a while again, that it is up; cancellation still stops it."""

from __future__ import annotations

import asyncio

import pytest
import structlog.testing

import labd.tasks
from labd.events import ComponentDown, ComponentUp, EventBus
from labd.tasks import Failures, TaskSet


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


def test_a_loop_failing_the_same_way_logs_one_traceback_then_one_line_each() -> None:
    """A database away for a minute: the first failure with its traceback, the repeats as
    a line with the count, a new error with its traceback again, and the recovery."""
    failures = Failures("dispatch")
    with structlog.testing.capture_logs() as logs:
        for _ in range(9):  # a loop that retries every second: said at the 2nd, 4th, 8th
            failures.failed(ConnectionResetError(104, "Connection reset by peer"))
        failures.failed(TimeoutError("no answer"))
        failures.succeeded()
        failures.succeeded()  # nothing to say when nothing had failed
    assert [(e["log_level"], e["event"]) for e in logs] == [
        ("error", "dispatch failed; trying again"),
        ("warning", "dispatch failed again; trying again"),
        ("warning", "dispatch failed again; trying again"),
        ("warning", "dispatch failed again; trying again"),
        ("error", "dispatch failed; trying again"),
        ("info", "dispatch works again"),
    ]
    assert [e.get("failures") for e in logs] == [None, 2, 4, 8, None, 10]
    assert isinstance(logs[0]["exc_info"], ConnectionResetError)
    assert "exc_info" not in logs[1] and "Connection reset" in logs[1]["error"]


def test_a_long_outage_is_still_said_once_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    import labd.tasks

    clock = [1000.0]
    monkeypatch.setattr(labd.tasks.time, "monotonic", lambda: clock[0])
    failures = Failures("dispatch")
    with structlog.testing.capture_logs() as logs:
        for _ in range(200):  # 200 s of a loop retrying every second
            failures.failed(ConnectionRefusedError(111, "Connect call failed"))
            clock[0] += 1
    said = [e.get("failures") for e in logs]
    assert said == [None, 2, 4, 8, 16, 32, 64, 124, 128, 188], said

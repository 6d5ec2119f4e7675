"""No task can end silently: a crash injected into each long-lived loop of a real daemon
(in-process, real broker and store) restarts that loop; while one stays down, /readyz answers
503 naming it, `labd_component_up` is 0 and the retained host status says "degraded"."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import labd.scheduler.alerts
import labd.tasks
from labd.config import load_config
from labd.daemon.app import Daemon
from labd.events import ComponentDown, ComponentUp
from labd.metrics.lab import LabMetrics
from labd.mqtt.bridge import MqttBridge
from labd.pool import Pool
from labd.scheduler import Scheduler
from tests.integration.mqtt.conftest import Follower, daemon_config
from tests.integration.mqtt.test_bridge import PREFIX


def crash_once(cls: type, name: str, monkeypatch: pytest.MonkeyPatch, times: int = 1) -> None:
    """Make cls.name raise the first `times` times it is called (an injected bug), then
    work."""
    original = getattr(cls, name)
    calls = {"n": 0}

    async def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= times:
            raise RuntimeError(f"injected crash in {name}")
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, patched)


async def get(port: int, path: str) -> tuple[int, str]:
    """GET on the side port from a thread: the daemon serves on this test's event loop."""
    return await asyncio.to_thread(_get, port, path)


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def _ready(daemon: Daemon) -> bool:
    return (await get(daemon.side_port.port or 0, "/readyz"))[0] == 200


async def _not_ready(port: int) -> bool:
    return (await get(port, "/readyz"))[0] == 503


async def running(daemon: Daemon) -> asyncio.Task[int]:
    task = asyncio.get_running_loop().create_task(daemon.run())
    for _ in range(200):
        if daemon.side_port.port is not None and getattr(daemon, "scheduler", None):
            break
        await asyncio.sleep(0.05)
    return task


async def until(check: Callable[[], Any], within: float = 30) -> None:
    for _ in range(int(within / 0.05)):
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


EXPECTED = {
    "scheduler:dispatch",
    "scheduler:reaper",
    "pool:discovery",
    "pool:health",
    "metrics:snapshot",
    "analysis:finished",
    "mqtt",
}


async def test_every_loop_restarts_after_an_injected_crash(
    mosquitto_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(labd.tasks, "BACKOFF_FIRST_S", 0.05)
    monkeypatch.setattr(labd.tasks, "HEALTHY_AFTER_S", 0.5)
    for cls, name, times in (
        (Scheduler, "_dispatch_loop", 1),
        (Scheduler, "_reap_loop", 1),
        (Pool, "_every", 2),  # discovery and health
        (LabMetrics, "_refresh_loop", 1),
        (MqttBridge, "_follow_devices", 1),  # inside the MQTT session
    ):
        crash_once(cls, name, monkeypatch, times)
    crashed_analysis = {"n": 0}
    real_dispatch = labd.scheduler.alerts.dispatch

    async def dispatch_crashing_once(*args: Any) -> None:
        crashed_analysis["n"] += 1
        if crashed_analysis["n"] == 1:
            raise RuntimeError("injected crash in the analysis")
        await real_dispatch(*args)

    monkeypatch.setattr(labd.scheduler.alerts, "dispatch", dispatch_crashing_once)
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon = Daemon(load_config(config))
    heard = daemon.bus.subscribe("test", ComponentDown, ComponentUp)
    task = await running(daemon)
    down: set[str] = set()
    up: set[str] = set()

    def collect() -> bool:
        while (event := heard.get_nowait()) is not None:
            (down if isinstance(event, ComponentDown) else up).add(event.component)
        # (storage says it is up at the start, without having been down)
        return down == up - {"storage"} == EXPECTED

    try:
        await until(collect)
        await until(lambda: _ready(daemon))
    finally:
        daemon.request_stop("test")
        assert await asyncio.wait_for(task, 30) == 0


async def test_a_component_that_stays_down_is_named_everywhere(
    mosquitto_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(labd.tasks, "BACKOFF_FIRST_S", 0.05)

    async def always_fails(self: Any, *args: Any) -> None:
        raise RuntimeError("power relay on fire")

    monkeypatch.setattr(Pool, "_every", always_fails)
    broker = mosquitto_factory()
    config = daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')
    daemon = Daemon(load_config(config))
    async with Follower(broker.port, topics=[f"{PREFIX}/hosts/+/status"]) as watcher:
        task = await running(daemon)
        try:
            port = daemon.side_port.port or 0
            await until(lambda: _not_ready(port))
            _, body = await get(port, "/readyz")
            assert "pool:health down: RuntimeError: power relay on fire" in body
            _, metrics = await get(port, "/metrics")
            assert 'labd_component_up{component="pool:health"} 0.0' in metrics

            # Discovery and health checks fail alike, each going down on its own: the status
            # is published again as each one does, so wait for the one naming the health loop.
            def degraded_naming_health() -> bool:
                statuses = watcher.on("hosts/labd/status")
                return (
                    bool(statuses)
                    and statuses[-1]["status"] == "degraded"
                    and "pool:health" in json.dumps(statuses[-1]["down"])
                )

            await until(degraded_naming_health)
            assert task.done() is False  # the daemon runs on
        finally:
            daemon.request_stop("test")
            assert await asyncio.wait_for(task, 30) == 0


async def test_the_lab_metrics_listen_before_the_scheduler_leases(
    mosquitto_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restarted host leases the jobs it takes back as soon as its scheduler starts, before
    its broker connection is up: the metrics that subscribed after it missed those leases,
    and the jobs never reached the wait and duration histograms."""
    listening: list[bool] = []
    start = Scheduler.start

    async def start_and_look(self: Scheduler) -> None:
        listening.append(any(s.name == "metrics" for s in self.bus._subscriptions))
        await start(self)

    monkeypatch.setattr(Scheduler, "start", start_and_look)
    broker = mosquitto_factory()
    daemon = Daemon(load_config(daemon_config(tmp_path, f'url = "mqtt://127.0.0.1:{broker.port}"')))
    task = await running(daemon)
    try:
        assert listening == [True]
    finally:
        daemon.request_stop("test")
        assert await asyncio.wait_for(task, 30) == 0

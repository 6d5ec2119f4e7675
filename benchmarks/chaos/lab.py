"""The lab under test: labd hosts as separate processes, each reaching PostgreSQL and the
broker through its own proxies; jobs submitted through the store; an MQTT recorder.

Jobs enter through `submit_jobs`, the one place that knows how: the JobService on a store of
the shared database (the same checks as the API and MQTT, without their authentication, which
is not what this harness tests). Should submission change, only that function changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt

from benchmarks.chaos.proxy import Proxy
from labd.events import EventBus
from labd.scheduler import JobService
from labd.store import Store
from labd_sim import SimDriver
from labd_sim.driver import SimOptions


@dataclass(frozen=True)
class Timing:
    lease_ttl_s: float = 3.0
    heartbeat_s: float = 0.5
    reap_interval_s: float = 0.5


class Host:
    """One `labd run` process with its proxies to the database and the broker."""

    def __init__(
        self, name: str, lab: str, root: Path, pg: Proxy, mqtt: Proxy, devices: int, t: Timing
    ) -> None:
        self.name, self.pg, self.mqtt = name, pg, mqtt
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "labd.toml"
        self.config.write_text(
            f'[daemon]\nlab = "{lab}"\nhost = "{name}"\nstate_dir = "{self.dir / "state"}"\n'
            "shutdown_grace = 2\n"
            '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
            f'[store]\nurl = "postgresql+asyncpg://postgres@127.0.0.1:{pg.port}/postgres"\n'
            f'[mqtt]\nurl = "mqtt://127.0.0.1:{mqtt.port}"\nreconnect_max_s = 2\n'
            f"[scheduler]\nlease_ttl_s = {t.lease_ttl_s}\nheartbeat_s = {t.heartbeat_s}\n"
            f"reap_interval_s = {t.reap_interval_s}\nretry_backoff_s = 0.2\n"
            "retry_backoff_max_s = 1\n"
            "[drivers.host]\nenabled = false\n"
            "[drivers.android]\nenabled = false\n"
            f'[drivers.sim]\nenabled = true\ndevices = {devices}\nprefix = "{name}-sim-"\n'
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.dir / f"labd-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labd", "--config", str(self.config), "run"],
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
        log.close()

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self, timeout: float = 20) -> int | None:
        if self.proc is None:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def exited(self) -> str:
        """Why the process is gone (its last log lines), or "" while it runs."""
        if self.proc is None or self.proc.poll() is None:
            return ""
        tail = (self.dir / f"labd-{self.starts}.log").read_text(errors="replace")[-800:]
        return f"{self.name} exited with {self.proc.returncode}: {tail}"

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for path in sorted(self.dir.glob("labd-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    with contextlib.suppress(ValueError):
                        lines.append(json.loads(line))
        return lines


def sim_spec(n: int, iterations: int, iteration_s: float) -> dict[str, Any]:
    return {
        "suite": "chaos",
        "test": f"t{n % 5}",
        "scenario": "sim",
        "iterations": iterations,
        "warmup": 1,
        "max_attempts": 20,  # faults are not the job's fault: let it through them
        "params": {"iteration_s": iteration_s},
        "device": {"platform": "sim"},
    }


async def submit_jobs(url: str, delivering_host: str, specs: dict[str, dict[str, Any]]) -> None:
    """Queue every spec by id, checked as any submission is. The jobs' first events go to
    `delivering_host`'s outbox (a running labd host publishes them)."""
    store = await Store.open(url, host=delivering_host)
    try:
        driver = SimDriver(SimOptions(enabled=True), delivering_host)
        jobs = JobService(store, {"sim": driver}, EventBus())
        for job_id, spec in specs.items():
            await jobs.submit(spec, "chaos", job_id=job_id, submitter="chaos")
    finally:
        await store.close()


@dataclass
class Received:
    at: float  # time.time() when the recorder got it
    topic: str
    body: dict[str, Any]


@dataclass
class Recorder:
    """Every job event and host status published on the lab's prefix, with arrival times.
    A persistent session (QoS 1) so that a broker restart or a reconnect loses nothing the
    broker kept."""

    port: int
    prefix: str
    messages: list[Received] = field(default_factory=list)
    connected: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        while True:
            try:
                async with aiomqtt.Client(
                    "127.0.0.1",
                    self.port,
                    identifier=f"chaos-recorder-{self.prefix.replace('/', '-')}",
                    clean_session=False,
                ) as client:
                    await client.subscribe(f"{self.prefix}/jobs/+/events", qos=1)
                    await client.subscribe(f"{self.prefix}/hosts/+/status", qos=1)
                    self.connected.set()
                    async for message in client.messages:
                        payload = message.payload
                        if isinstance(payload, bytes | bytearray):
                            with contextlib.suppress(ValueError):
                                body = json.loads(payload)
                                self.messages.append(
                                    Received(time.time(), str(message.topic), body)
                                )
            except aiomqtt.MqttError:
                self.connected.clear()
                await asyncio.sleep(0.5)


async def retained_statuses(port: int, prefix: str, wait_s: float = 2.0) -> dict[str, str]:
    """The retained status of every host, as a client arriving now sees it."""
    found: dict[str, str] = {}
    async with aiomqtt.Client("127.0.0.1", port) as client:
        await client.subscribe(f"{prefix}/hosts/+/status", qos=1)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                async for message in client.messages:
                    if isinstance(message.payload, bytes | bytearray):
                        body = json.loads(message.payload)
                        found[str(message.topic).split("/")[-2]] = body.get("status", "?")
    return found

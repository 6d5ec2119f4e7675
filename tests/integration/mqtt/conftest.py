"""A private Mosquitto per test (its own port, optionally persistent, TLS or passwords), and
a real MQTT client that collects what labd publishes."""

from __future__ import annotations

import asyncio
import getpass
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from labd.auth import Credentials, hash_password, new_credentials, sign, token_digest
from tests.conftest import REQUIRE_SERVICES, TEST_PROGRAMS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Mosquitto:
    """mosquitto -c <file>, restartable (for outage tests), on a free port."""

    def __init__(self, workdir: Path, extra: str = "") -> None:
        self.port = free_port()
        self.workdir = workdir
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(
            # Run as whoever runs the tests: as root mosquitto would otherwise switch to its
            # own user, which cannot read the test's private directory.
            f"user {getpass.getuser()}\n"
            f"listener {self.port} 127.0.0.1\n"
            f"persistence true\npersistence_location {workdir}/\n{extra}"
        )
        if "allow_anonymous" not in extra:
            self.conf.write_text(self.conf.read_text() + "allow_anonymous true\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        log = (self.workdir / "mosquitto.log").open("ab")
        self.proc = subprocess.Popen(["mosquitto", "-c", str(self.conf)], stderr=log, stdout=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(
            f"mosquitto did not start: {(self.workdir / 'mosquitto.log').read_text()}"
        )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def mosquitto_factory(tmp_path: Path) -> Iterator[Any]:
    if shutil.which("mosquitto") is None:
        if REQUIRE_SERVICES:
            pytest.fail("mosquitto is not installed and LABD_REQUIRE_SERVICES=1")
        pytest.skip("mosquitto is not installed (apt-get install mosquitto)")
    started: list[Mosquitto] = []

    def start(extra: str = "", name: str = "broker") -> Mosquitto:
        workdir = tmp_path / name
        workdir.mkdir()
        broker = Mosquitto(workdir, extra)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


# The principals every test daemon admits: a CI system that submits, and an operator.
CI = new_credentials("ci")
OPS = new_credentials("ops")
VIEWER = new_credentials("dash")
ROLES = {CI: "submitter", OPS: "admin", VIEWER: "viewer"}


def principal_toml(creds: Credentials, role: str, **more: Any) -> str:
    lines = [
        f"[auth.principals.{creds.principal}]",
        f'role = "{role}"',
        f'secret_keys = {{ "{creds.key_id}" = "{creds.secret_key}" }}',
        f'token_sha256 = ["{token_digest(creds.token)}"]',
        f'broker_password_hash = "{hash_password(creds.broker_password)}"',
        *(f"{key} = {json.dumps(value)}" for key, value in more.items()),
    ]
    return "\n".join(lines) + "\n"


def daemon_config(tmp_path: Path, mqtt: str, name: str = "labd", extra: str = "") -> Path:
    path = tmp_path / f"{name}.toml"
    principals = "".join(principal_toml(c, role) for c, role in ROLES.items())
    path.write_text(
        f'[daemon]\nlab = "lab1"\nhost = "{name}"\nstate_dir = "{tmp_path / name}"\n'
        f'shutdown_grace = 3\n[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
        f"[scheduler]\nlease_ttl_s = 3\nheartbeat_s = 0.5\nreap_interval_s = 0.5\n"
        f"[policy]\nprograms = {json.dumps(TEST_PROGRAMS)}\n"
        f"{principals}"
        f"[mqtt]\n{mqtt}\n{extra}"
    )
    return path


def signed(topic: str, body: dict[str, Any], creds: Credentials = CI, **auth: Any) -> bytes:
    """A request as a principal signs it (version 2), optionally with a given time or nonce."""
    message = {"schema_version": 2, **body}
    payload = sign(message, topic, creds.principal, creds.key_id, creds.key, **auth)
    return json.dumps(payload).encode()


async def publish_signed(
    port: int, topic: str, body: dict[str, Any], creds: Credentials = CI, **client: Any
) -> bytes:
    """Sign and publish; returns the exact payload (to replay it)."""
    payload = signed(topic, body, creds)
    await publish(port, topic, payload, **client)
    return payload


def spec(iterations: int = 3, seconds: float = 0.01) -> dict[str, Any]:
    return {
        "suite": "mq",
        "test": "sleep",
        "scenario": "command",
        "iterations": iterations,
        "warmup": 0,
        "params": {"command": ["sleep", str(seconds)]},
        "device": {"platform": "host"},
    }


class Follower:
    """A CI-like client: subscribes to a prefix and records every message by topic."""

    def __init__(
        self,
        port: int,
        prefix: str = "labd/v1/lab1",
        topics: list[str] | None = None,
        **client: Any,
    ) -> None:
        self.port, self.prefix, self.client_kw = port, prefix, client
        self.topics = topics or [f"{prefix}/#"]
        self.messages: list[tuple[str, Any]] = []
        self.task: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()

    async def run(self) -> None:
        while True:
            try:
                options = {"identifier": "follower", "clean_session": False, **self.client_kw}
                async with aiomqtt.Client("127.0.0.1", self.port, **options) as client:
                    for topic in self.topics:
                        await client.subscribe(topic, qos=1)
                    self.ready.set()
                    async for message in client.messages:
                        try:
                            body = json.loads(message.payload)  # type: ignore[arg-type]
                        except (ValueError, RecursionError):
                            body = message.payload
                        self.messages.append((message.topic.value, body))
            except aiomqtt.MqttError:
                await asyncio.sleep(0.2)

    async def __aenter__(self) -> Follower:
        self.task = asyncio.get_running_loop().create_task(self.run())
        await asyncio.wait_for(self.ready.wait(), 10)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.task is not None
        self.task.cancel()

    def on(self, suffix: str) -> list[Any]:
        return [body for topic, body in self.messages if topic == f"{self.prefix}/{suffix}"]

    async def wait_for(self, predicate: Any, within: float = 60) -> None:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if predicate():
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"timed out; messages so far: {self.messages[-10:]}")


async def publish(port: int, topic: str, payload: bytes, **client: Any) -> None:
    async with aiomqtt.Client("127.0.0.1", port, **client) as c:
        await c.publish(topic, payload, qos=1)


async def start_ci_client(tmp_path: Path, port: int, manifest: str) -> asyncio.subprocess.Process:
    """examples/ci_client.py submitting `manifest` (TOML text) to lab1 on the broker at `port`
    as the CI principal; its stdout and stderr are pipes."""
    import os
    import sys

    (tmp_path / "m.toml").write_text(manifest)
    credentials = tmp_path / "ci.toml"
    credentials.write_text(CI.to_toml())
    example = Path(__file__).parents[3] / "examples" / "ci_client.py"
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(example),
        str(tmp_path / "m.toml"),
        f"127.0.0.1:{port}",
        "lab1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "LABD_CREDENTIALS": str(credentials)},
    )

"""MQTT: submit -> accepted latency next to the broker's own round trip, and outbox drain rate.

Starts a private Mosquitto on a free port and a real `labd run` against it (SQLite store), then
measures, in one run:
- the broker's publish -> receive round trip (QoS 1, one client, sequential);
- submit -> accepted: an MQTT 5 submission until its answer on the response topic;
- events per second drained from the outbox: N queued events delivered after a restart;
- the share of a submission no broker can remove: the store's transaction alone, and fdatasync.

Run: python benchmarks/mqtt_bench.py [--submits 300] [--events 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiomqtt
import numpy as np
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from labd.auth import hash_password, new_credentials, sign
from labd.model import TestSpec
from labd.store import Store
from labd.store.tables import outbox

PREFIX = "labd/v1/bench"
SPEC = {
    "suite": "bench",
    "test": "true",
    "scenario": "command",
    "iterations": 1,
    "warmup": 0,
    "params": {"command": ["true"]},
}
NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]  # as labd's own client does
BENCH = new_credentials("bench")  # an admin principal: submits (signed) and drains devices
ANSWERS = f"{PREFIX}/replies/bench/answers"


def signed(topic: str, body: dict[str, Any]) -> bytes:
    message = {"schema_version": 2, **body}
    return json.dumps(sign(message, topic, "bench", BENCH.key_id, BENCH.key)).encode()


async def command_devices(port: int, devices: list[str], action: str) -> None:
    """Signed device commands, each waited for (its answer on the reply topic)."""
    async with aiomqtt.Client("127.0.0.1", port, socket_options=NODELAY) as c:
        await c.subscribe(ANSWERS, qos=1)
        for device in devices:
            topic = f"{PREFIX}/devices/{device}/command"
            body = {"action": action, "reply_to": ANSWERS}
            await c.publish(topic, signed(topic, body), qos=1)
            async for message in c.messages:
                assert json.loads(message.payload)["ok"], message.payload  # type: ignore[arg-type]
                break


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start_broker(work: Path) -> tuple[int, subprocess.Popen[bytes]]:
    """A private Mosquitto on a free port: (its port, its process)."""
    port = free_port()
    # set_tcp_nodelay: docs/mqtt.md; without it small messages wait for delayed ACKs.
    (work / "m.conf").write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\nset_tcp_nodelay true\n"
    )
    broker = subprocess.Popen(["mosquitto", "-c", str(work / "m.conf")], stderr=subprocess.DEVNULL)
    wait_port(port)
    return port, broker


def write_config(work: Path, port: int, http: int = 0) -> Path:
    """labd's configuration for the benchmarks: SQLite in `work`, the broker at `port`, an
    admin principal (BENCH) that may submit without limits, the metrics on `http`."""
    config = work / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "bench"\nhost = "bench"\nstate_dir = "{work}"\n'
        f"[http]\nport = {http}\napi_port = 0\n"
        f'[log]\nformat = "json"\nlevel = "info"\n'
        f'[policy]\nprograms = ["true"]\n'
        f'[mqtt]\nurl = "mqtt://127.0.0.1:{port}"\n'
        f'[auth.principals.bench]\nrole = "admin"\nsubmits_per_minute = 100000\n'
        f"max_active_jobs = 1000000\n"
        f'secret_keys = {{ "{BENCH.key_id}" = "{BENCH.secret_key}" }}\n'
        f'broker_password_hash = "{hash_password(BENCH.broker_password)}"\n'
    )
    return config


def start_daemon(config: Path, log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "labd", "--config", str(config), "run"],
        stderr=log.open("ab"),
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().count('"mqtt connected"') > 0:
            return process
        time.sleep(0.05)
    raise RuntimeError(f"labd did not connect: {log.read_text()[-2000:]}")


def percentiles(ms: list[float]) -> tuple[float, float]:
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


async def round_trip(port: int, count: int) -> list[float]:
    samples = []
    async with aiomqtt.Client(
        "127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V5, socket_options=NODELAY
    ) as c:
        await c.subscribe("bench/rt", qos=1)
        for n in range(count):
            start = time.perf_counter()
            await c.publish("bench/rt", str(n), qos=1)
            async for _ in c.messages:
                break
            samples.append((time.perf_counter() - start) * 1000)
    return samples


async def device_ids(port: int) -> list[str]:
    """The lab's devices, from their retained state topics."""
    found: list[str] = []
    async with aiomqtt.Client("127.0.0.1", port) as c:
        await c.subscribe(f"{PREFIX}/devices/+/state", qos=1)
        try:
            async with asyncio.timeout(2):
                async for message in c.messages:
                    found.append(json.loads(message.payload)["device_id"])  # type: ignore[arg-type]
        except TimeoutError:
            pass
    return found


async def submit_latency(port: int, count: int, tag: str) -> list[float]:
    samples = []
    async with aiomqtt.Client(
        "127.0.0.1", port, protocol=aiomqtt.ProtocolVersion.V5, socket_options=NODELAY
    ) as c:
        await c.subscribe(ANSWERS, qos=1)
        topic = f"{PREFIX}/jobs/submit"
        for n in range(count):
            props = Properties(PacketTypes.PUBLISH)
            props.ResponseTopic = ANSWERS
            props.CorrelationData = str(n).encode()
            start = time.perf_counter()  # signing is part of what a client pays
            body = signed(topic, {"id": f"{tag}-{n}", "spec": SPEC})
            await c.publish(topic, body, qos=1, properties=props)
            async for message in c.messages:
                assert json.loads(message.payload)["accepted"], message.payload  # type: ignore[arg-type]
                break
            samples.append((time.perf_counter() - start) * 1000)
    return samples


async def store_share(work: Path, count: int) -> tuple[list[float], list[float]]:
    """What persisting costs on this disk: the store's submit transaction alone (SQLite,
    synchronous=FULL), and one fdatasync of a small write."""
    store = await Store.open(f"sqlite+aiosqlite:///{work / 'share.db'}", host="bench")
    spec = TestSpec.model_validate(SPEC)
    commits = []
    for n in range(count):
        start = time.perf_counter()
        await store.submit_job(f"share-{n}", spec, "bench")
        commits.append((time.perf_counter() - start) * 1000)
    await store.close()
    syncs = []
    fd = os.open(work / "fsync", os.O_WRONLY | os.O_CREAT)
    try:
        for _ in range(count):
            os.write(fd, b"x" * 4096)
            start = time.perf_counter()
            os.fdatasync(fd)
            syncs.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
    return commits, syncs


async def queue_events(db: str, count: int) -> None:
    store = await Store.open(f"sqlite+aiosqlite:///{db}", host="bench")
    rows = [
        {
            "job_id": f"drain-{n}",
            "seq": 1,
            "kind": "queued",
            "state": "queued",
            "event_id": f"e{n}",
            "time": time.time(),
            "host": "bench",
            "data": {},
        }
        for n in range(count)
    ]
    for at in range(0, count, 1000):
        async with store.engine.begin() as conn:
            for body in rows[at : at + 1000]:
                await conn.execute(
                    outbox.insert().values(
                        host="bench",
                        stream="job",
                        key=body["job_id"],
                        seq=1,
                        body=body,
                        created_at=time.time(),
                    )
                )
    await store.close()


async def drain_rate(port: int, config: Path, log: Path, db: str, count: int) -> float:
    await queue_events(db, count)
    received = 0
    async with aiomqtt.Client("127.0.0.1", port, socket_options=NODELAY) as c:
        await c.subscribe(f"{PREFIX}/jobs/+/events", qos=1)
        daemon = start_daemon(config, log)
        first = last = 0.0
        try:
            async with asyncio.timeout(300):
                async for message in c.messages:
                    if message.topic.value.split("/")[-2].startswith("drain-"):
                        received += 1
                        last = time.perf_counter()
                        first = first or last
                        if received == count:
                            break
        finally:
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(30)
    return count / (last - first) if last > first else float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--submits", type=int, default=300)
    parser.add_argument("--events", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port, broker = start_broker(work)
        try:
            config = write_config(work, port)
            log = work / "labd.log"
            daemon = start_daemon(config, log)
            try:
                raw = await round_trip(port, args.submits)
                devices = await device_ids(port)
                # a quiet lab: jobs queue, none runs
                await command_devices(port, devices, "maintenance")
                quiet = await submit_latency(port, args.submits, "quiet")
                # a busy lab: jobs run back to back meanwhile
                await command_devices(port, devices, "enable")
                busy = await submit_latency(port, args.submits, "busy")
                # the drain below is measured with no job running
                await command_devices(port, devices, "maintenance")
            finally:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(60)
            rate = await drain_rate(port, config, log, str(work / "labd.db"), args.events)
            commits, syncs = await store_share(work, args.submits)
        finally:
            broker.terminate()
    (raw50, raw99) = percentiles(raw)
    print(f"{'measure':<40} {'p50 ms':>8} {'p99 ms':>8} {'p99 / RT p99':>12}")
    print(f"{'broker round trip (QoS 1)':<40} {raw50:>8.2f} {raw99:>8.2f}")
    for name, samples in (("quiet lab", quiet), ("busy lab (jobs running)", busy)):
        p50, p99 = percentiles(samples)
        label = f"submit -> accepted, {name}"
        print(f"{label:<40} {p50:>8.2f} {p99:>8.2f} {p99 / raw99:>11.1f}x")
    for name, samples in (
        ("store's submit transaction alone", commits),
        ("fdatasync alone (same disk)", syncs),
    ):
        p50, p99 = percentiles(samples)
        print(f"{name:<40} {p50:>8.2f} {p99:>8.2f} {p99 / raw99:>11.1f}x")
    print(f"outbox drained: {rate:.0f} events/s ({args.events} events after a restart)")
    print(f"({args.submits} samples each; SQLite store, synchronous=FULL; target p99 <= 3x RT)")


if __name__ == "__main__":
    asyncio.run(main())

"""MQTT: what a flood of junk costs labd, its memory and its reading.

Starts a private Mosquitto and a real `labd run` against it (SQLite store), then one client
publishes --messages small unsigned messages (QoS 0) on the submit topic as fast as it can,
while a signed submission is sent every second. Prints the daemon's resident memory before,
its peak (VmHWM) and after, the messages labd read (refused as unsigned) and dropped unread
from its full inbox (both from /metrics), and how many of the signed submissions were
answered, with the slowest answer.

Run: python benchmarks/mqtt_flood_bench.py [--messages 150000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiomqtt

sys.path.insert(0, str(Path(__file__).parent))
from mqtt_bench import (
    NODELAY,
    PREFIX,
    SPEC,
    free_port,
    signed,
    start_broker,
    start_daemon,
    write_config,
)

SUBMIT = f"{PREFIX}/jobs/submit"
ANSWERS = f"{PREFIX}/replies/bench/flood"


def memory_kib(pid: int, field: str) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    return int(found.group(1)) if found else 0


def refusals(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    pattern = r'labd_auth_refusals_total\{channel="mqtt",reason="(\w+)"\} (\S+)'
    return {reason: float(value) for reason, value in re.findall(pattern, text)}


async def flood(port: int, count: int) -> float:
    async with aiomqtt.Client("127.0.0.1", port, socket_options=NODELAY) as client:
        started = time.monotonic()
        for i in range(count):
            await client.publish(SUBMIT, b'{"junk": %d}' % i, qos=0)
        return time.monotonic() - started


async def submissions(port: int, stop: asyncio.Event) -> tuple[int, list[float]]:
    """A signed submission a second until `stop`, then 10 s for the last answers: (sent, the
    seconds each answered one took)."""
    sent: dict[str, float] = {}
    took: list[float] = []
    async with aiomqtt.Client("127.0.0.1", port, socket_options=NODELAY) as client:
        await client.subscribe(ANSWERS, qos=1)

        async def listen() -> None:
            async for message in client.messages:
                answer = json.loads(message.payload)  # type: ignore[arg-type]
                if answer.get("job_id") in sent:  # accepted or not: answered
                    took.append(time.monotonic() - sent[answer["job_id"]])

        async with asyncio.TaskGroup() as group:
            listener = group.create_task(listen())
            while not stop.is_set():
                job = f"flood-{len(sent)}"
                body = {"id": job, "reply_to": ANSWERS, "spec": SPEC}
                sent[job] = time.monotonic()
                await client.publish(SUBMIT, signed(SUBMIT, body), qos=1)
                await asyncio.sleep(1)
            await asyncio.sleep(10)
            listener.cancel()
    return len(sent), took


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=150_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        port, broker = start_broker(work)
        http = free_port()
        try:
            daemon = start_daemon(write_config(work, port, http), work / "labd.log")
            try:
                before = memory_kib(daemon.pid, "VmRSS")
                stop = asyncio.Event()
                async with asyncio.TaskGroup() as group:
                    probe = group.create_task(submissions(port, stop))
                    seconds = await flood(port, args.messages)
                    await asyncio.sleep(5)  # the backlog the broker still holds reaches labd
                    stop.set()
                sent, took = probe.result()
                peak, after = memory_kib(daemon.pid, "VmHWM"), memory_kib(daemon.pid, "VmRSS")
                counted = refusals(http)
            finally:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(60)
        finally:
            broker.terminate()
    rate = args.messages / seconds
    print(f"flood: {args.messages:,} unsigned messages in {seconds:.1f} s ({rate:,.0f} a second)")
    print(f"{'measure':<46} {'value':>12}")
    print(f"{'daemon RSS before (MiB)':<46} {before / 1024:>12.0f}")
    print(f"{'daemon peak RSS, VmHWM (MiB)':<46} {peak / 1024:>12.0f}")
    print(f"{'daemon RSS after (MiB)':<46} {after / 1024:>12.0f}")
    print(f"{'read and refused as unsigned':<46} {counted.get('unsigned', 0):>12,.0f}")
    print(f"{'dropped unread, inbox full':<46} {counted.get('inbox_full', 0):>12,.0f}")
    slowest = f"{max(took):.1f} s" if took else "-"
    print(f"{'signed submissions answered / sent':<46} {f'{len(took)} / {sent}':>12}")
    print(f"{'slowest answer':<46} {slowest:>12}")


if __name__ == "__main__":
    asyncio.run(main())

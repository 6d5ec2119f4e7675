"""Replay accuracy (latency, bandwidth) and speed next to mitmproxy, on loopback, one run.

- latency: time to first byte on a kept-alive connection, shaped minus unshaped (medians of 15),
  against the configured round trip; target within 2 ms or 2%, whichever is larger;
- bandwidth: a 5 MB body at 1.6, 5 and 50 Mbit/s against the ideal time; target within 3%;
- throughput: a 100-resource page replayed (wrk, 1 thread, 10 connections, 10 s, each request
  the next of the 100 URLs, absolute-form through the proxy), and a 5 MB body for MB/s; labd
  (`labd replay serve`, one process) beside mitmproxy 11.0.2 (`mitmdump --server-replay`,
  installed in this benchmark's own virtual environment, never a labd dependency) on the same
  archive. Target: at least 5 times mitmproxy's requests per second.

Run: python benchmarks/replay/replay_bench.py [--no-mitmproxy]   (needs wrk: Debian's wrk)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import aiohttp

from labd.replay.har import har_document, har_entry
from labd.replay.process import ReplayProcess
from labd.replay.shaping import Profile

WHEN = "2026-01-01T00:00:00+00:00"
SITE = "http://site.test"


def make_archive(path: Path) -> list[str]:
    """100 resources of 1-20 KB and one 5 MB body; Content-Length recorded (mitmproxy keeps
    connections alive only then)."""
    entries, urls = [], []
    for i in range(100):
        body = bytes([i]) * (1024 * (1 + i % 20))
        headers = [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(body)))]
        url = f"{SITE}/r{i}"
        urls.append(url)
        entries.append(har_entry("GET", url, [], b"", 200, "OK", headers, body, WHEN, 1))
    big = bytes(range(256)) * (5_000_000 // 256)
    entries.append(
        har_entry(
            "GET",
            f"{SITE}/big",
            [],
            b"",
            200,
            "OK",
            [("Content-Length", str(len(big)))],
            big,
            WHEN,
            1,
        )
    )
    path.write_text(json.dumps(har_document(entries, "bench")))
    return urls


async def ttfb(port: int, n: int = 15) -> float:
    """Median time to first byte, ms, on one kept-alive connection."""
    times = []
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as http:
        for i in range(n + 1):
            began = time.perf_counter()
            async with http.get(f"http://127.0.0.1:{port}/r1", headers={"Host": "site.test"}) as r:
                await r.content.readany()
                elapsed = time.perf_counter() - began
                await r.read()
            if i:  # the first sets the connection up
                times.append(elapsed * 1000)
    return statistics.median(times)


async def download(port: int) -> float:
    async with aiohttp.ClientSession() as http:
        began = time.perf_counter()
        async with http.get(f"http://127.0.0.1:{port}/big", headers={"Host": "site.test"}) as r:
            size = len(await r.read())
        return time.perf_counter() - began, size  # type: ignore[return-value]


async def accuracy(archive: Path) -> None:
    server = ReplayProcess(archive, Profile())
    await server.start()
    base = await ttfb(server.port)
    await server.stop()
    print(f"\nLatency: unshaped time to first byte {base:.2f} ms (median of 15)\n")
    print("round trip | measured added | error | allowed | ok")
    for rtt in (20, 50, 100, 200, 300):
        server = ReplayProcess(archive, Profile(latency_ms=rtt))
        await server.start()
        added = await ttfb(server.port) - base
        await server.stop()
        allowed = max(2.0, 0.02 * rtt)
        print(
            f"{rtt} ms | {added:.2f} ms | {added - rtt:+.2f} ms | {allowed:.1f} ms | "
            f"{abs(added - rtt) <= allowed}"
        )
    print("\nBandwidth: a 5 MB body\n")
    print("rate | ideal | measured | error | ok")
    for mbps in (1.6, 5, 50):
        server = ReplayProcess(archive, Profile(down_kbps=mbps * 1000))
        await server.start()
        elapsed, size = await download(server.port)
        await server.stop()
        ideal = size * 8 / (mbps * 1e6)
        error = 100 * (elapsed / ideal - 1)
        print(
            f"{mbps} Mbit/s | {ideal:.2f} s | {elapsed:.2f} s | {error:+.2f}% | {abs(error) <= 3}"
        )


def wrk(port: int, urls: list[str], workdir: Path, seconds: int = 10) -> tuple[float, float]:
    """(requests/s, MB/s) from wrk cycling through `urls` as absolute-form proxy requests."""
    script = workdir / "cycle.lua"
    listed = ", ".join(f'"{u}"' for u in urls)
    script.write_text(
        f"local urls = {{{listed}}}\nlocal i = 0\n"
        "request = function()\n  i = i + 1\n"
        '  return wrk.format("GET", urls[(i % #urls) + 1], {Host = "site.test"})\nend\n'
    )
    command = ["wrk", "-t1", "-c10", f"-d{seconds}s", "-s", str(script), f"http://127.0.0.1:{port}"]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    transfer = re.search(r"Transfer/sec:\s+([\d.]+)(\w+)", out)
    assert transfer is not None
    scale = {"B": 1e-6, "KB": 1e-3, "MB": 1, "GB": 1e3}[transfer.group(2)]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        print(f"  (wrk saw {errors.group(1)} non-2xx responses)")
    return rps, float(transfer.group(1)) * scale


def mitmdump(workdir: Path) -> Path | None:
    if shutil.which("wrk") is None:
        return None
    venv.create(workdir / "mitm", with_pip=True)
    pip = workdir / "mitm" / "bin" / "pip"
    subprocess.run([str(pip), "install", "-q", "mitmproxy==11.0.2"], check=True)
    return workdir / "mitm" / "bin" / "mitmdump"


def wait_port(port: int, timeout: float = 60) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port}")


async def throughput(archive: Path, urls: list[str], workdir: Path, with_mitm: bool) -> None:
    rows = []
    server = ReplayProcess(archive, Profile())
    await server.start()
    page = wrk(server.port, urls, workdir)
    large = wrk(server.port, [f"{SITE}/big"], workdir)
    await server.stop()
    rows.append(("labd replay serve", page, large))
    binary = mitmdump(workdir) if with_mitm else None
    if binary is not None:
        port = 18765
        command = [str(binary), "-q", "--listen-port", str(port), "--server-replay", str(archive)]
        command += ["--set", "server_replay_reuse=true", "--set", "server_replay_extra=404"]
        command += ["--set", "connection_strategy=lazy"]
        mitm = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            rows.append(
                (
                    "mitmdump --server-replay",
                    wrk(port, urls, workdir),
                    wrk(port, [f"{SITE}/big"], workdir),
                )
            )
        finally:
            mitm.terminate()
            mitm.wait()
    print("\nThroughput (wrk -t1 -c10 -d10s)\n")
    print("server | 100-resource page, requests/s | page MB/s | 5 MB body, requests/s | MB/s")
    for name, (rps, mbs), (big_rps, big_mbs) in rows:
        print(f"{name} | {rps:.0f} | {mbs:.1f} | {big_rps:.1f} | {big_mbs:.0f}")
    if len(rows) == 2:
        print(f"\nlabd / mitmproxy: {rows[0][1][0] / rows[1][1][0]:.1f}x requests/s, "
              f"{rows[0][2][1] / rows[1][2][1]:.1f}x MB/s on the large body")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-mitmproxy", action="store_true")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="labd-replay-bench-"))
    archive = workdir / "site.har"
    urls = make_archive(archive)
    asyncio.run(accuracy(archive))
    asyncio.run(throughput(archive, urls, workdir, not args.no_mitmproxy))
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""Replay server memory with slow readers: N clients ask for one large body and read slowly.

`labd replay serve` (its own process, as the runner starts it) loads an archive with one
body of --mb MB; N clients send the request and then read nothing for --hold seconds, so
whatever the server cannot send waits in its buffers; then each reads its whole answer,
checked byte for byte. Prints the server's RSS after loading and its peak (VmHWM, from /proc,
reset once the archive is loaded) while the clients held back.

Run: python benchmarks/replay/slow_readers_bench.py [--mb 50] [--clients 20] [--hold 3]
Another checkout's server: see benchmarks/api_results_bench.py (PYTHONPATH, working directory).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import socket
import tempfile
import time
from pathlib import Path

from labd.replay.har import har_document, har_entry
from labd.replay.process import ReplayProcess
from labd.replay.shaping import Profile

URL = "http://site.test/big"


def memory_kib(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(v) for k, v in re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", status, re.M)}


def read_answer(sock: socket.socket) -> bytes:
    data = bytearray()
    while chunk := sock.recv(1 << 20):
        data += chunk
    return bytes(data)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--hold", type=float, default=3.0)
    args = parser.parse_args()
    body = bytes(range(256)) * int(args.mb * 2**20 / 256)
    with tempfile.TemporaryDirectory(prefix="labd-slow-readers-") as work:
        archive = Path(work) / "big.har"
        headers = [("Content-Type", "application/octet-stream")]
        entry = har_entry("GET", URL, [], b"", 200, "OK", headers, body, "2026-01-01T00:00:00Z", 1)
        archive.write_text(json.dumps(har_document([entry], "bench")))
        server = ReplayProcess(archive, Profile(name="none"))
        await server.start()
        assert server.process is not None
        pid = server.process.pid
        loaded = memory_kib(pid)
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
        clients = []
        for _ in range(args.clients):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow phone's window
            sock.connect(("127.0.0.1", server.port))
            request = f"GET {URL} HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n"
            sock.sendall(request.encode())
            clients.append(sock)
        await asyncio.sleep(args.hold)
        held = memory_kib(pid)
        started = time.perf_counter()
        answers = await asyncio.gather(*(asyncio.to_thread(read_answer, s) for s in clients))
        drained = time.perf_counter() - started
        for sock in clients:
            sock.close()
        await server.stop()
    want = hashlib.sha256(body).hexdigest()
    complete = sum(hashlib.sha256(a.split(b"\r\n\r\n", 1)[1]).hexdigest() == want for a in answers)
    print(f"{args.clients} slow readers of a {args.mb:g} MB body")
    print(f"{'RSS after load (MB)':<32}{loaded['VmRSS'] / 1024:>10.0f}")
    print(f"{'peak RSS while held (MB)':<32}{held['VmHWM'] / 1024:>10.0f}")
    print(f"{'answers complete and equal':<32}{complete:>10d}")
    print(f"{'then read in (s)':<32}{drained:>10.2f}")


if __name__ == "__main__":
    asyncio.run(main())

"""Floods of connections that never finish a request: the replay server times them out,
caps them below its file descriptor limit, outlives running out of descriptors, and serves
new clients once the flood has gone. Real processes with a low RLIMIT_NOFILE, real sockets."""

from __future__ import annotations

import asyncio
import json
import resource
import socket
import sys
import time
from pathlib import Path
from subprocess import PIPE

import aiohttp
from aiohttp import web

from labd.replay.har import har_document, har_entry
from labd.replay.listener import Listener

FDS = 128


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FDS, FDS))


async def _flood(port: int, n: int) -> list[socket.socket]:
    """n connections that each send the start of a request and never the rest."""
    held = []
    for _ in range(n):
        conn = socket.socket()
        conn.setblocking(False)
        await asyncio.get_running_loop().sock_connect(conn, ("127.0.0.1", port))
        conn.send(b"GET / HTTP/1.1\r\n")
        held.append(conn)
    return held


async def _get(port: int, within: float) -> int:
    timeout = aiohttp.ClientTimeout(total=within)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(f"http://127.0.0.1:{port}/", headers={"Host": "site.test"}) as r,
    ):
        return r.status


async def _started(*command: str) -> tuple[asyncio.subprocess.Process, int]:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=PIPE, stderr=PIPE, preexec_fn=_low_fd_limit
    )
    assert process.stdout is not None
    return process, json.loads(await process.stdout.readline())["listening"]


async def _stopped(process: asyncio.subprocess.Process) -> str:
    process.terminate()
    out, err = await asyncio.wait_for(process.communicate(), 30)
    return (out + err).decode()


async def test_serve_caps_connections_and_recovers_when_the_flood_leaves(tmp_path: Path) -> None:
    """With 128 descriptors and 300 held connections the accept task died of EMFILE and the
    port stayed dead (LISTEN queue full) while the process looked healthy."""
    archive = tmp_path / "site.har"
    entry = har_entry("GET", "http://site.test/", [], b"", 200, "OK", [], b"page", "", 1)
    archive.write_text(json.dumps(har_document([entry], "test")))
    server, port = await _started(
        sys.executable, "-m", "labd", "replay", "serve", str(archive), "--port", "0"
    )
    try:
        assert await _served_after_a_flood(port, server) < 2
    finally:
        output = await _stopped(server)
    assert output.count("connection limit reached") == 1, output
    assert "Traceback" not in output


async def _served_after_a_flood(port: int, server: asyncio.subprocess.Process) -> float:
    """300 connections held for a second, then let go: seconds until a request is answered."""
    flood = await _flood(port, 300)
    await asyncio.sleep(1)
    assert server.returncode is None
    for conn in flood:
        conn.close()
    began = time.perf_counter()
    assert await _get(port, within=5) == 200
    return time.perf_counter() - began


# A listener allowed more connections than it has descriptors for, so that accept() itself
# fails with EMFILE: the backoff, not the cap, has to save it.
UNCAPPED = """
import asyncio
from aiohttp import web
from labd.replay.listener import Listener

async def main():
    async def hello(request):
        return web.Response(text="hello")
    listener = Listener(hello, "127.0.0.1", 0, max_connections=100_000)
    await listener.start()
    print(listener.port, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_accept_outlives_running_out_of_descriptors() -> None:
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-c", UNCAPPED, stdout=PIPE, stderr=PIPE, preexec_fn=_low_fd_limit
    )
    assert server.stdout is not None
    port = int(await server.stdout.readline())
    try:
        assert await _served_after_a_flood(port, server) < 3
    finally:
        output = await _stopped(server)
    assert output.count("accept failed; retrying") == 1, output
    assert "Too many open files" in output


async def test_unfinished_request_headers_are_timed_out() -> None:
    """Headers begun and never finished held the connection (and its descriptor) forever,
    on a new connection and after an answer on a kept-alive one."""

    async def hello(_: web.BaseRequest) -> web.Response:
        return web.Response(text="hello")

    listener = Listener(hello, "127.0.0.1", 0, timeout=0.5)
    await listener.start()
    try:
        first = await _flood(listener.port, 1)
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHo")  # one and a half
        began = time.perf_counter()
        answered = await asyncio.wait_for(reader.read(), 3)  # until the server closes it
        assert answered.startswith(b"HTTP/1.1 200") and answered.count(b"HTTP/1.1") == 1
        assert 0.4 < time.perf_counter() - began < 1.5
        loop = asyncio.get_running_loop()
        assert await asyncio.wait_for(loop.sock_recv(first[0], 100), 1) == b""  # closed too
        first[0].close()
        writer.close()
    finally:
        await listener.close()

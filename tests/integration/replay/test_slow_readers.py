"""Clients that read slowly cost the replay server a socket buffer each, not a copy of the body
(a phone on a slow link, or many at once, must not take the host's memory)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import tracemalloc
from pathlib import Path

import pytest

from labd.replay.har import har_document, har_entry, load
from labd.replay.listener import Listener
from labd.replay.replaying import ReplayHandler
from labd.replay.shaping import PROFILES, Profile, Shaper

BODY = bytes(range(256)) * (8 * 4096)  # 8 MiB
READERS = 5


async def _serve_slow_readers(tmp_path: Path, profile: Profile) -> tuple[int, list[bytes]]:
    """(the most memory Python allocated while READERS clients held their answers back; the
    answers, read in full afterwards)."""
    entry = har_entry("GET", "http://site.test/big", [], b"", 200, "OK", [], BODY, "2026", 1)
    path = tmp_path / "big.har"
    path.write_text(json.dumps(har_document([entry], "test")))
    handler = ReplayHandler(load(path, 2**30), Shaper(profile))
    listener = Listener(handler, "127.0.0.1", 0)
    await listener.start()
    tracemalloc.start()
    try:
        clients = []
        for _ in range(READERS):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", listener.port))
            await asyncio.get_running_loop().sock_sendall(
                sock, b"GET /big HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n"
            )
            clients.append(sock)
        await asyncio.sleep(1.0)  # the server writes what it can; nobody reads
        _, peak = tracemalloc.get_traced_memory()
        answers = await asyncio.gather(*(_read_all(sock) for sock in clients))
    finally:
        tracemalloc.stop()
        await listener.close()
    return peak, answers


async def _read_all(sock: socket.socket) -> bytes:
    data = bytearray()
    loop = asyncio.get_running_loop()
    while chunk := await loop.sock_recv(sock, 1 << 20):
        data += chunk
    sock.close()
    return bytes(data.split(b"\r\n\r\n", 1)[1])


async def test_slow_readers_share_one_copy_of_a_large_body(tmp_path: Path) -> None:
    peak, answers = await _serve_slow_readers(tmp_path, PROFILES["none"])
    assert all(answer == BODY for answer in answers)
    # Before: each reader's unsent remainder was copied into its transport (5 x 8 MiB).
    assert peak < len(BODY), f"{peak / 2**20:.1f} MiB allocated for {READERS} readers"


async def test_a_client_gone_mid_body_is_counted_not_logged_as_a_server_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A browser closing a tab, or wrk ending its run, resets connections mid-answer: that is
    the client's doing. It used to log "Error handling request" with a traceback per request."""
    entry = har_entry("GET", "http://site.test/big", [], b"", 200, "OK", [], BODY, "2026", 1)
    path = tmp_path / "big.har"
    path.write_text(json.dumps(har_document([entry], "test")))
    handler = ReplayHandler(load(path, 2**30), Shaper(PROFILES["none"]))
    listener = Listener(handler, "127.0.0.1", 0)
    await listener.start()
    loop = asyncio.get_running_loop()
    try:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", listener.port))
        await loop.sock_sendall(sock, b"GET /big HTTP/1.1\r\nHost: site.test\r\n\r\n")
        assert await loop.sock_recv(sock, 4096)  # the answer has begun
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # a reset, not a polite end
        for _ in range(100):
            if handler.stats.errors:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
    finally:
        await listener.close()
    assert handler.stats.errors == 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]

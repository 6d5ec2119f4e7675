"""Running a replay or record server in the foreground until SIGTERM or SIGINT.

It prints one JSON line when it listens (`{"listening": PORT, ...}`) and one with its summary
when it stops, so a parent process (the runner) can wait for it and read what it served."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, ClientTimeout, TCPConnector

from labd.acceptor import connection_limit
from labd.replay.certs import Authority
from labd.replay.har import Archive
from labd.replay.listener import Listener
from labd.replay.recording import RecordHandler
from labd.replay.replaying import ReplayHandler
from labd.replay.shaping import Shaper

PER_ORIGIN = 16  # connections to one origin (scheme, host, port); others wait their turn
# An origin has 30 s to connect (a wait for a free connection included), 60 s between reads
# and 300 s for the whole exchange.
UPSTREAM_TIMEOUT = ClientTimeout(total=300, connect=30, sock_read=60)


def _print(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


async def _until_stopped() -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def serve(
    archive: Archive, shaper: Shaper, host: str, port: int, authority: Authority | None
) -> dict[str, Any]:
    handler = ReplayHandler(archive, shaper)
    listener = Listener(handler, host, port, authority)
    await listener.start()
    ready = {"listening": listener.port, "host": host, "entries": len(archive)}
    _print(ready | {"skipped": archive.skipped, "profile": shaper.profile.fingerprint()})
    try:
        await _until_stopped()
    finally:
        await listener.close()
    summary = handler.stats.summary()
    _print(summary)
    return summary


async def record(
    out: Path,
    host: str,
    port: int,
    authority: Authority | None,
    upstream_ca: Path | None,
    max_body: int,
) -> Path:
    """Record until SIGTERM or SIGINT, then write `out`; bodies over `max_body` bytes (decoded)
    are refused."""
    context = ssl.create_default_context(cafile=str(upstream_ca) if upstream_ca else None)
    clients = connection_limit(fds_per_connection=2)  # each may hold one to its origin
    connector = TCPConnector(ssl=context, limit=clients, limit_per_host=PER_ORIGIN)
    async with ClientSession(
        connector=connector, timeout=UPSTREAM_TIMEOUT, auto_decompress=True
    ) as session:
        handler = RecordHandler(session, out, max_body)
        # A client that leaves cancels its handler, and with it the request to the origin.
        listener = Listener(
            handler, host, port, authority, max_connections=clients, handler_cancellation=True
        )
        await listener.start()
        _print({"listening": listener.port, "host": host, "recording": str(out)})
        try:
            await _until_stopped()
        finally:
            await listener.close()
            handler.write()
    _print({"recorded": len(handler.entries), "failed": handler.failed, "archive": str(out)})
    print(f"labd replay: {len(handler.entries)} entries written to {out}", file=sys.stderr)
    return out

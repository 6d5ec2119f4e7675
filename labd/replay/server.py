"""Running a replay or record server in the foreground until SIGTERM or SIGINT.

It prints one JSON line when it listens (`{"listening": PORT, ...}`) and one with its summary
when it stops, so a parent process (the runner) can wait for it and read what it served."""

from __future__ import annotations

import asyncio
import json
import os
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


SKIPPED_LISTED = 100  # entries the listening line names of those skipped (it counts them all)


def _print(payload: dict[str, Any]) -> None:
    print(json.dumps(payload), flush=True)


def _stop_on_signals() -> asyncio.Event:
    """Set on SIGTERM or SIGINT. Installed before the listening line is printed: a signal
    sent as soon as it is read ended the process with Python's default (exit 130), and the
    summary was never written."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def serve(
    archive: Archive, shaper: Shaper, host: str, port: int, authority: Authority | None
) -> dict[str, Any]:
    handler = ReplayHandler(archive, shaper)
    listener = Listener(handler, host, port, authority)
    await listener.start()
    ready = {"listening": listener.port, "host": host, "entries": len(archive)}
    skipped = {"skipped": archive.skipped[:SKIPPED_LISTED], "skipped_count": len(archive.skipped)}
    stop = _stop_on_signals()
    # SIGUSR1 asks for the counts so far, a line on stdout (a job's runner, after each
    # iteration); set before the listening line, after which it may come.
    tally = handler.stats.tally
    asyncio.get_running_loop().add_signal_handler(
        signal.SIGUSR1, lambda: _print({"tally": tally()})
    )
    _print(ready | skipped | {"profile": shaper.profile.fingerprint()})
    try:
        await stop.wait()
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
    overwrite: bool = False,
) -> Path | None:
    """Record until SIGTERM or SIGINT, then write `out` (replacing a file there only with
    `overwrite`); bodies over `max_body` bytes (decoded) are refused. None when nothing was
    recorded: `out` is then left as it was, or not created."""
    context = ssl.create_default_context(cafile=str(upstream_ca) if upstream_ca else None)
    clients = connection_limit(fds_per_connection=2)  # each may hold one to its origin
    connector = TCPConnector(ssl=context, limit=clients, limit_per_host=PER_ORIGIN)
    # Bodies are decoded by labd's own decoders (labd.replay.encoding), not aiohttp's.
    async with ClientSession(
        connector=connector, timeout=UPSTREAM_TIMEOUT, auto_decompress=False
    ) as session:
        handler = RecordHandler(session, out, max_body, overwrite)
        # A client that leaves cancels its handler, and with it the request to the origin.
        listener = Listener(
            handler, host, port, authority, max_connections=clients, handler_cancellation=True
        )
        await listener.start()
        stop = _stop_on_signals()
        _print({"listening": listener.port, "host": host, "recording": str(out)})
        try:
            await stop.wait()
        finally:
            await listener.close()
            # An archive of no entries serves nothing, and it replaced a recording of 11.
            written = handler.write() if handler.entries else None
    _say_recorded(handler, written)
    return written


def _say_recorded(handler: RecordHandler, written: Path | None) -> None:
    """The summary on stdout (its archive null when nothing was written), a line on stderr."""
    recorded = len(handler.entries)
    archive = str(written) if written else None
    _print({"recorded": recorded, "failed": handler.failed, "archive": archive})
    if written is None:
        kept = "left as it was" if os.path.lexists(handler.out) else "not created"
        print(f"labd replay: nothing recorded; {handler.out} {kept}", file=sys.stderr)
    else:
        print(f"labd replay: {recorded} entries written to {written}", file=sys.stderr)

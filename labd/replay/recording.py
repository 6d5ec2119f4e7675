"""Record: a forward proxy (plain HTTP, and CONNECT for HTTPS through the replay CA) that
fetches each request from its origin and keeps it as a HAR 1.2 entry, bodies included.

What an origin can cost is bounded: a body is read as sent up to `max_body` bytes, decoded
(gzip and the like, by labd's own decoders) up to as many, and refused past either; a body
that ends early is not recorded; a client that leaves cancels its request to the origin. A
request for the recorder's own address is refused rather than sent round in a loop."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import fcntl
import ipaddress
import json
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import structlog
from aiohttp import ClientError, ClientResponseError, ClientSession, web
from yarl import URL

from labd import __version__
from labd.errors import UsageError
from labd.replay.encoding import DECODERS, Undecodable, coding_of, decoded
from labd.replay.har import DROPPED_HEADERS, har_document, har_entry
from labd.replay.replaying import request_url

log = structlog.get_logger("labd.replay")


class TooLarge(Exception):
    """The origin's body is over the recorder's limit."""


class RecordHandler:
    def __init__(
        self, session: ClientSession, out: Path, max_body: int, overwrite: bool = False
    ) -> None:
        self.session = session
        self.out = out
        self.max_body = max_body
        self.overwrite = overwrite
        self.entries: list[dict[str, Any]] = []
        self.failed = 0

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        url = request_url(request)
        if await _is_itself(request, URL(url)):
            return web.Response(
                status=400,
                text=f"labd replay record: {url} is this recorder itself; "
                "set it as the browser's proxy and ask for the site\n",
            )
        body = await request.read()
        headers = [
            (k, v)
            for k, v in request.headers.items()
            if k.lower() not in DROPPED_HEADERS | {"host", "accept-encoding"}
        ]
        if codings := _decodable(request.headers.get("Accept-Encoding", "")):
            headers.append(("Accept-Encoding", codings))
        # Without this aiohttp asks for gzip where the client asked for nothing (identity).
        unasked = () if codings else ("Accept-Encoding",)
        started = datetime.datetime.now(datetime.UTC).isoformat()
        began = time.perf_counter()
        try:
            async with self.session.request(
                request.method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                skip_auto_headers=unasked,
            ) as upstream:
                wire = await self._read(upstream.content)  # as sent: the session decodes nothing
                coding = coding_of(upstream.headers.get("Content-Encoding", ""))
                # Decoded, as HAR keeps bodies (off the event loop: up to max_body of inflating);
                # no body (HEAD, 204, 304) has nothing to decode.
                payload = wire
                if coding and wire:
                    payload = await asyncio.to_thread(decoded, wire, coding, self.max_body)
                status, reason = upstream.status, upstream.reason or ""
                # The HAR keeps the origin's Content-Encoding and Content-Length, as browsers'
                # exports do (replay encodes the body again, and frames it itself; a HEAD's
                # length is sent again); the client gets the body decoded, framed by aiohttp,
                # and a HEAD's length where no coding makes it the encoded body's.
                recorded_headers = [
                    (k, v)
                    for k, v in upstream.headers.items()
                    if k.lower() not in DROPPED_HEADERS - {"content-encoding", "content-length"}
                ]
                framed = {"content-encoding", "content-length"}
                if request.method == "HEAD" and not coding:
                    framed = {"content-encoding"}
                reply_headers = [(k, v) for k, v in recorded_headers if k.lower() not in framed]
        except (ClientError, TimeoutError, OSError, TooLarge, Undecodable) as e:
            self.failed += 1
            why = str(e) or type(e).__name__
            if isinstance(e, ClientResponseError):  # aiohttp's parser refused the answer
                said = " ".join(line.strip() for line in e.message.splitlines() if line.strip())
                why = f"the origin's answer is not valid HTTP/1.1 ({said[:300]})"
            log.warning("record_upstream_failed", url=url, error=why)
            return web.Response(
                status=502, text=f"labd replay record: {url}: {why}; not recorded\n"
            )
        elapsed = (time.perf_counter() - began) * 1000
        self.entries.append(
            har_entry(
                request.method,
                url,
                headers,
                body,
                status,
                reason,
                recorded_headers,
                payload,
                started,
                elapsed,
                len(wire),
            )
        )
        return web.Response(
            status=status, reason=reason or None, headers=reply_headers, body=payload
        )

    async def _read(self, content: Any) -> bytes:
        """The whole body, as sent, or TooLarge as soon as it passes the limit; a body cut short
        raises ClientPayloadError from aiohttp."""
        chunks, size = [], 0
        async for chunk in content.iter_any():
            size += len(chunk)
            if size > self.max_body:
                raise TooLarge(
                    f"the body is over the limit of {self.max_body / 2**20:g} MiB "
                    "(labd replay record --max-body-mb)"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def write(self) -> Path:
        """The archive, replaced atomically so a reader never sees half of it; never over
        what is not a file (a device, a pipe: as root, /dev/null became a regular file), nor,
        without `overwrite`, over a file that appeared while recording."""
        partial = partial_of(self.out)
        partial.write_text(json.dumps(har_document(self.entries, __version__), indent=1))
        problem = not_a_file(self.out) or (not self.overwrite and already_there(self.out))
        if problem:
            raise UsageError(f"{problem}; the recording is in {partial}")
        partial.replace(self.out)
        return self.out


def partial_of(out: Path) -> Path:
    """Where a recording of `out` is written before it is put in place."""
    return out.with_name(out.name + ".partial")


def claim(out: Path) -> int:
    """A recording's hold on `out`: its .partial, created empty and locked for as long as the
    recorder runs (an open descriptor; `release` ends it). A second recorder of the same archive
    is refused: both said they had written it, and only the last one's entries were kept. An
    unlocked .partial with something in it is a recording that was not put in place."""
    partial = partial_of(out)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(partial, flags, 0o644)
    except OSError as e:
        raise UsageError(f"{out}: cannot be written: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(
            f"{out}: another labd replay record is recording it (it holds {partial})"
        ) from None
    if os.fstat(fd).st_size:
        os.close(fd)
        raise UsageError(
            f"{partial} exists: a recording that was not moved into place; move it away first"
        )
    return fd


def release(fd: int, out: Path) -> None:
    """Ends `claim`'s hold; its .partial goes when nothing was written to it (a recording
    put in place took it, one that could not be is kept, as the message about it says)."""
    partial = partial_of(out)
    try:
        held = os.fstat(fd)
        # Gone already when the recording was put in place: nothing to remove.
        with contextlib.suppress(FileNotFoundError):
            if not held.st_size and os.path.samestat(held, partial.lstat()):
                partial.unlink()
    finally:
        os.close(fd)


def already_there(path: Path) -> str | None:
    """Why a recording may not replace `path` without --overwrite (something is there), or
    None."""
    if not os.path.lexists(path):
        return None
    return f"{path} exists; labd replay record keeps it (--overwrite replaces it)"


def _decodable(accept_encoding: str) -> str:
    """The client's Accept-Encoding less the codings labd cannot decode here (br without the
    brotli module, zstd, compress, and "*", which lets the origin choose any): an origin
    answering in one of those got a 502, so a browser's "gzip, deflate, br, zstd" made much
    of a site unrecordable."""
    kept = []
    for item in accept_encoding.split(","):
        coding = coding_of(item.partition(";")[0])  # x-gzip is gzip; identity is ""
        if coding in DECODERS or (item.strip() and not coding):
            kept.append(item.strip())
    return ", ".join(kept)


def not_a_file(path: Path) -> str | None:
    """Why an archive may not be written at `path` (something there that is neither a file
    nor a link, which the archive would replace), or None."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return None
    kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device, a pipe)"
    return f"{path}: {kind}; an archive is written as a file"


async def _is_itself(request: web.BaseRequest, url: URL) -> bool:
    """Whether `url` names this recorder: the port the client reached it on, on an address of
    this machine (loopback, the listening one, any local one)."""
    here = request.transport.get_extra_info("sockname") if request.transport else None
    if not here or url.host is None or url.port != here[1]:
        return False
    loop = asyncio.get_running_loop()
    try:
        found = await asyncio.wait_for(
            loop.getaddrinfo(url.host, url.port, type=socket.SOCK_STREAM), 5
        )
    except (OSError, TimeoutError):
        return False  # unknown here: the origin request fails on its own
    return any(_local(info[0], str(info[4][0])) for info in found)


def _local(family: int, address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.is_loopback or ip.is_unspecified:
        return True
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))  # only an address of this machine can be bound
        except OSError:
            return False
    return True

"""One port for everything a device may send: plain HTTP (origin-form with a Host header, or
a forward proxy's absolute-form), CONNECT tunnels for HTTPS through the proxy, and direct TLS
(origin mode, e.g. Chromium's --host-resolver-rules mapping every host to this port).

Each accepted socket is peeked at, not read: a TLS ClientHello starts TLS with the certificate
the client's SNI asks for; "CONNECT " gets a tunnel; anything else goes to aiohttp's HTTP
server as it is.

A flood cannot take the port away: a client has `timeout` seconds to send its first bytes, and
as long for each request's headers (from connecting, or from the answer before); open
connections are capped below the file descriptor limit (new ones wait in the listen queue
meanwhile); and an accept that fails (EMFILE, ENFILE, ENOBUFS) is retried after a backoff.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import re
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from labd.acceptor import Acceptor, connection_limit
from labd.errors import UsageError
from labd.replay.certs import Authority
from labd.tasks import TaskSet
from labd.throttle import OncePerMinute

log = structlog.get_logger("labd.replay")

REQUEST_LINE_MAX = 64 * 1024  # bytes of a request line, and of a header

CONNECT = b"CONNECT "
MAX_CONNECT_HEAD = 16 * 1024
TIMEOUT_S = 30.0


class Listener:
    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
        host: str,
        port: int,
        authority: Authority | None = None,
        timeout: float = TIMEOUT_S,
        max_connections: int | None = None,
        **server_options: Any,
    ) -> None:
        """Listen on host:port (a UsageError naming --host or --port when that cannot be);
        `handler` answers each request (aiohttp's low-level server calls it)."""
        # aiohttp's keep-alive timer runs from the connection's start or the answer before
        # until a whole request has arrived: the time-out for a request's headers.
        # Pages carry long URLs (tracking pixels) and cookies: aiohttp's 8 KiB default for a
        # request line or header made them unrecordable.
        self.server = web.Server(
            handler,
            access_log=None,
            keepalive_timeout=timeout,
            max_line_size=REQUEST_LINE_MAX,
            max_field_size=REQUEST_LINE_MAX,
            **server_options,
        )
        self.authority = authority
        self.timeout = timeout
        self.said = OncePerMinute()  # what a client causes is logged at most once a minute
        try:
            self.sock = socket.create_server((host, port), backlog=1024, reuse_port=False)
        except OSError as e:
            option = "--port" if e.errno == errno.EADDRINUSE else "--host"
            raise UsageError(f"{option}: cannot listen on {host}:{port}: {e.strerror or e}") from e
        self.port: int = self.sock.getsockname()[1]
        self.tasks = TaskSet("replay")  # the accept loop, each connection's set-up, tunnels
        self.acceptor = Acceptor(
            self.sock,
            self._dispatch,
            max_connections or connection_limit(),
            self.tasks,
            f"{host}:{self.port}",
        )

    async def start(self) -> None:
        self.acceptor.start()

    async def close(self) -> None:
        await self.tasks.cancel_all(grace=2.0)
        self.sock.close()
        await self.server.shutdown(2.0)

    async def _dispatch(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            first = await asyncio.wait_for(_peek(conn, len(CONNECT)), self.timeout)
            if not first:
                conn.close()
            elif first[0] == 0x16:  # a TLS handshake record
                if self.authority is None:
                    conn.close()  # no CA configured: nothing to present
                    return
                await loop.connect_accepted_socket(
                    self.server,
                    conn,
                    ssl=self.authority.sni_context(),
                    ssl_handshake_timeout=self.timeout,
                )
            elif first.startswith(CONNECT):
                await loop.connect_accepted_socket(lambda: Tunnel(self), conn)
            else:
                await loop.connect_accepted_socket(self.server, conn)
        except (TimeoutError, OSError, ConnectionError):
            conn.close()


async def _peek(conn: socket.socket, size: int) -> bytes:
    """Up to `size` bytes without consuming them; fewer only when they cannot be CONNECT."""
    loop = asyncio.get_running_loop()
    while True:
        readable = loop.create_future()
        loop.add_reader(conn.fileno(), readable.set_result, None)
        try:
            await readable
        finally:
            loop.remove_reader(conn.fileno())
        data = conn.recv(size, socket.MSG_PEEK)
        if len(data) >= size or not data or not CONNECT.startswith(data):
            return data
        await asyncio.sleep(0.005)  # a CONNECT still arriving byte by byte


HOST_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)", re.IGNORECASE)


def _certifiable(name: str) -> bool:
    """A name a certificate may be issued for: an IP address, or a DNS name whose labels
    are letters, digits and inner hyphens (no wildcard, no empty label)."""
    try:
        return bool(ipaddress.ip_address(name))
    except ValueError:  # not an address: a name
        labels = name.removesuffix(".").split(".")
        return len(name) <= 253 and all(HOST_LABEL.fullmatch(label) for label in labels)


class Tunnel(asyncio.Protocol):
    """CONNECT host:port: answer 200, then speak TLS as that host (signed by the replay CA)
    and serve what comes through it like any other request."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.timer = asyncio.get_running_loop().call_later(self.listener.timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > MAX_CONNECT_HEAD:
                self._refuse(431, "Request Header Fields Too Large")
            return
        if self.timer is not None:
            self.timer.cancel()
        self.transport.pause_reading()
        # UTF-8 for a host in Unicode (IDNA-encoded below); other bytes fail that encoding
        line = bytes(self.buffer[: self.buffer.find(b"\r\n")]).decode("utf-8", "surrogateescape")
        parts = line.split()
        port = parts[1].rsplit(":", 1)[1] if len(parts) == 3 and ":" in parts[1] else ""
        if not (port.isdigit() and 0 < int(port) < 65536):
            self._refuse(400, "Bad Request", "CONNECT takes one host:port (a port 1-65535)")
            return
        if self.listener.authority is None:
            self._refuse(501, "Not Implemented", "HTTPS needs a CA: start it with --ca DIR")
            return
        host = parts[1].rsplit(":", 1)[0].strip("[]")
        try:  # a name the certificate cannot hold (empty, not IDNA) is refused before the 200
            name = host.encode("idna").decode("ascii")
            if not _certifiable(name):
                raise ValueError("not a host name or an IP address")
            context = self.listener.authority.context(name)
        except ValueError as e:  # UnicodeError included
            if (left_out := self.listener.said.due("connect_refused")) is not None:
                log.info("connect_refused", host=ascii(host), error=str(e), left_out=left_out)
            self._refuse(400, "Bad Request", f"CONNECT {host!a}: {e}")
            return
        # Held by the listener's task set: an unreferenced task can be collected mid-handshake.
        self.listener.tasks.spawn("tunnel", self._upgrade(host, context))

    def _refuse(self, status: int, reason: str, why: str = "") -> None:
        assert self.transport is not None
        body = (why + "\n").encode() if why else b""
        head = f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n"
        self.transport.write(head.encode() + b"Connection: close\r\n\r\n" + body)
        self.transport.close()

    async def _upgrade(self, host: str, context: ssl.SSLContext) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.transport.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        protocol = self.listener.server()
        try:
            tls = await loop.start_tls(
                self.transport,
                protocol,
                context,
                server_side=True,
                ssl_handshake_timeout=self.listener.timeout,
            )
        except Exception as e:  # whatever went wrong, this tunnel ends and the others go on
            if (left_out := self.listener.said.due("tunnel_failed")) is not None:
                error = f"{type(e).__name__}: {e}"
                log.info("tunnel_failed", host=host, error=error, left_out=left_out)
            self.transport.close()
            return
        if tls is None:
            return
        protocol.connection_made(tls)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()

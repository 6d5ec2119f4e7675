"""The HTTP side: the side port with /healthz (alive), /readyz (dependencies reachable) and
/metrics, open and read-only, and the web console (/console, behind its own sign-in); and
the API on listeners of its own (a Unix socket, and a TCP
address for bearer-token clients), so exposing /metrics to Prometheus never exposes the API.

No client can take the daemon's descriptors: aiohttp serves each listener through a
`labd.acceptor.Acceptor` (not asyncio's accept loop) holding at most `connection_cap()`
connections open, and its keep-alive timer (`http.header_timeout_s`, aiohttp's default an hour)
closes a connection whose request's headers have not all arrived in time."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, LineTooLong
from prometheus_client import CONTENT_TYPE_LATEST

from labd.acceptor import Acceptor, open_files_limit
from labd.config import HttpSettings
from labd.daemon.listeners import (
    BACKLOG,
    cannot_listen,
    remove_socket,
    tcp_socket,
    unix_socket,
)
from labd.tasks import TaskSet

log = structlog.get_logger("labd.http")

Probe = Callable[[], Awaitable[str | None]]
"""A readiness check: None when fine, else the reason it is not."""

PROBE_TIMEOUT = 2.0

# On every answer of every listener (the console adds its own stricter set): a job's data or a
# metrics page is not for a shared cache, nor to be sniffed into another type.
PLAIN_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


async def plain_headers(_: web.Request, response: web.StreamResponse) -> None:
    """An `on_response_prepare` hook: PLAIN_HEADERS where the answer has not set its own."""
    for name, value in PLAIN_HEADERS.items():
        response.headers.setdefault(name, value)


class QuotesNothing(web.RequestHandler):
    """aiohttp's own answer to a request it cannot read quotes it (`Got more than 8190 bytes
    when reading: b'Bearer 3f9a...'`: a credential came back in the body, on a page with no
    no-store). This one names the fault and quotes nothing."""

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status != HTTPStatus.INTERNAL_SERVER_ERROR:  # aiohttp's 500 already quotes nothing
            message = f"{status} {HTTPStatus(status).phrase}: {_unreadable(exc)}\n"
        response = super().handle_error(request, status, exc, message)
        response.headers.update(PLAIN_HEADERS)
        return response


def _unreadable(exc: BaseException | None) -> str:
    if isinstance(exc, LineTooLong):
        return "the request line or a header is over 8190 bytes"
    if isinstance(exc, BadHttpMethod):
        return "this is not an HTTP request"
    # aiohttp's own words where they quote nothing the client sent.
    if isinstance(exc, BadHttpMessage) and (found := _HEADER_COUNT.fullmatch(exc.message)):
        name = found["name"]
        if found["fault"] == "Duplicate":
            return f"the {name} header is given more than once; send one"
        return f"no {name} header (HTTP/1.1 asks for one)"
    return "a malformed HTTP request"


_HEADER_COUNT = re.compile(r"(?P<fault>Duplicate|Missing) '(?P<name>[A-Za-z-]{1,40})' header.*")


def connection_cap(settings: HttpSettings, listeners: int) -> int:
    """Connections each of `listeners` HTTP listeners may hold open: http.max_connections, and
    never more than half the descriptor limit between them all, so that a flood leaves the
    other half to jobs, the database and devices."""
    return max(1, min(settings.max_connections, open_files_limit() // (2 * listeners)))


SIDE_PORT = "http side port ([http] host and port)"  # what a refusal to listen names
API_PORT = "api ([http] api_host and api_port)"


class SidePort:
    """Small aiohttp servers; components add readiness probes (and the daemon the API) before
    start."""

    name = "http"

    def __init__(
        self, settings: HttpSettings, render_metrics: Callable[[], bytes], instance: str = ""
    ) -> None:
        """`instance`: the state directory's id (labd.daemon.statedir), said by /healthz."""
        self.settings = settings
        self.instance = instance
        self.probes: dict[str, Probe] = {}
        self.app = web.Application()
        self.app.on_response_prepare.append(plain_headers)
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)
        self._render_metrics = render_metrics
        self._runners: list[web.AppRunner] = []
        self._acceptors = TaskSet("http")  # each listener's accept loop and connection set-ups
        self._sockets: list[socket.socket] = []
        self._bound: list[socket.socket] = []  # the TCP ports taken, not yet served
        self.port: int | None = None
        self.api: web.Application | None = None
        self.api_socket: Path | None = None
        self.api_port: int | None = None

    def add_console(self, console: web.Application, prefix: str) -> None:
        """Serve the web console under `prefix` (it has its own sign-in and guard)."""
        self.app.add_subapp(prefix, console)

        async def to_console(_: web.Request) -> web.Response:
            raise web.HTTPSeeOther(f"{prefix}/")

        self.app.router.add_get("/", to_console)
        self.app.router.add_get(prefix, to_console)

    def add_probe(self, name: str, probe: Probe) -> None:
        self.probes[name] = probe

    def add_api(self, api: web.Application, socket_path: Path) -> None:
        """Serve `api` on the Unix socket at `socket_path` and on http.api_host:api_port."""
        api.on_response_prepare.append(plain_headers)
        self.api, self.api_socket = api, socket_path

    def take_ports(self, api: bool) -> None:
        """Bind the TCP ports before any other component starts: a second labd on this
        machine (another account's) connected to the broker as this host and said it was
        offline, before it found the port taken. `api`: the API will be served too."""
        s = self.settings
        self._bound = [tcp_socket(s.host, s.port, SIDE_PORT)]
        if api and s.api_host:
            try:
                self._bound.append(tcp_socket(s.api_host, s.api_port, API_PORT))
            except BaseException:
                self.release_ports()
                raise

    def release_ports(self) -> None:
        """Close the ports taken and never served (a component after them failed)."""
        for sock in self._bound:
            sock.close()
        self._bound = []

    async def start(self) -> None:
        settings = self.settings
        if not self._bound:
            self.take_ports(self.api is not None)
        side, *api_tcp = self._bound
        # Every socket listens before anything serves: a taken port stops the start whole.
        try:
            for sock, where in zip(self._bound, (SIDE_PORT, API_PORT), strict=False):
                try:
                    sock.listen(BACKLOG)
                except OSError as e:  # bound by another at once (two starting together)
                    host, port = sock.getsockname()
                    raise cannot_listen(e, f"{where}: cannot listen on {host}:{port}") from e
            sockets = [side]
            api_sockets: list[socket.socket] = []
            if self.api is not None and self.api_socket is not None:
                api_sockets.append(await asyncio.to_thread(unix_socket, self.api_socket, "api"))
                api_sockets += api_tcp
            else:
                for sock in api_tcp:
                    sock.close()
        except BaseException:
            self.release_ports()
            raise
        self._bound = []  # served from here on: stop() closes them
        self.port = sockets[0].getsockname()[1]
        cap = connection_cap(settings, len(sockets) + len(api_sockets))
        await self._serve(self.app, sockets, cap)
        log.info("http side port listening", host=settings.host, port=self.port, connections=cap)
        if self.api is not None:
            await self._serve(self.api, api_sockets, cap)
            self.api_port = api_sockets[1].getsockname()[1] if len(api_sockets) > 1 else None
            log.info(
                "http api listening",
                socket=str(self.api_socket),
                host=settings.api_host or None,
                port=self.api_port,
            )

    async def _serve(self, app: web.Application, sockets: list[socket.socket], cap: int) -> None:
        # aiohttp's keep-alive timer runs from the connection's start or the answer before
        # until a whole request has arrived: the time-out for a request's headers.
        options: dict[str, Any] = {
            "access_log": None,
            "keepalive_timeout": self.settings.header_timeout_s,
        }
        runner = web.AppRunner(app, handle_signals=False, **options)
        await runner.setup()
        self._runners.append(runner)
        server = runner.server
        assert server is not None  # set up just now
        loop = asyncio.get_running_loop()

        def protocol() -> QuotesNothing:
            return QuotesNothing(server, loop=loop, **options)

        async def connect(conn: socket.socket) -> None:
            try:
                await loop.connect_accepted_socket(protocol, conn)
            except OSError:  # the client left before it was served
                conn.close()

        for sock in sockets:
            self._sockets.append(sock)
            Acceptor(sock, connect, cap, self._acceptors, _name(sock)).start()

    async def stop(self, grace: float) -> None:
        await self._acceptors.cancel_all(grace=2.0)
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        if self.api_socket is not None:
            await asyncio.to_thread(remove_socket, self.api_socket)

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "state_dir_id": self.instance})

    async def _readyz(self, _: web.Request) -> web.Response:
        names = list(self.probes)
        results = await asyncio.gather(*(self._run_probe(n) for n in names))
        checks = {name: reason or "ok" for name, reason in zip(names, results, strict=True)}
        ready = all(reason is None for reason in results)
        body = {"status": "ready" if ready else "not ready", "checks": checks}
        return web.json_response(body, status=200 if ready else 503)

    async def _run_probe(self, name: str) -> str | None:
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                return await self.probes[name]()
        except TimeoutError:
            return f"no answer within {PROBE_TIMEOUT:g} s"
        except Exception as e:
            log.warning("readiness probe failed", probe=name, error=repr(e))
            return f"probe failed: {e!r}"

    async def _metrics(self, _: web.Request) -> web.Response:
        body = await asyncio.to_thread(self._render_metrics)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _name(sock: socket.socket) -> str:
    """How the logs name a listener: its address, or its Unix socket's path."""
    address = sock.getsockname()
    return str(address) if sock.family == socket.AF_UNIX else f"{address[0]}:{address[1]}"

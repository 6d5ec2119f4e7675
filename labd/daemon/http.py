"""The HTTP side: the side port with /healthz (alive), /readyz (dependencies reachable) and
/metrics, open and read-only, and the web console (/console, behind its own sign-in); and
the API on listeners of its own (a Unix socket, and a TCP
address for bearer-token clients), so exposing /metrics to Prometheus never exposes the API."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from labd.config import HttpSettings
from labd.daemon.listeners import remove_socket, tcp_socket, unix_socket

log = structlog.get_logger("labd.http")

Probe = Callable[[], Awaitable[str | None]]
"""A readiness check: None when fine, else the reason it is not."""

PROBE_TIMEOUT = 2.0


class SidePort:
    """Small aiohttp servers; components add readiness probes (and the daemon the API) before
    start."""

    name = "http"

    def __init__(self, settings: HttpSettings, render_metrics: Callable[[], bytes]) -> None:
        self.settings = settings
        self.probes: dict[str, Probe] = {}
        self.app = web.Application()
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)
        self._render_metrics = render_metrics
        self._runners: list[web.AppRunner] = []
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
        self.api, self.api_socket = api, socket_path

    async def start(self) -> None:
        settings = self.settings
        # Every socket is bound before anything serves: a taken port stops the start whole.
        sockets = [tcp_socket(settings.host, settings.port, "http side port")]
        api_sockets: list[socket.socket] = []
        try:
            if self.api is not None and self.api_socket is not None:
                api_sockets.append(await asyncio.to_thread(unix_socket, self.api_socket, "api"))
                if settings.api_host:
                    api_sockets.append(tcp_socket(settings.api_host, settings.api_port, "api"))
        except BaseException:
            for sock in sockets + api_sockets:
                sock.close()
            raise
        self.port = sockets[0].getsockname()[1]
        await self._serve(self.app, sockets)
        log.info("http side port listening", host=settings.host, port=self.port)
        if self.api is not None:
            await self._serve(self.api, api_sockets)
            self.api_port = api_sockets[1].getsockname()[1] if len(api_sockets) > 1 else None
            log.info(
                "http api listening",
                socket=str(self.api_socket),
                host=settings.api_host or None,
                port=self.api_port,
            )

    async def _serve(self, app: web.Application, sockets: list[socket.socket]) -> None:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runners.append(runner)
        for sock in sockets:
            await web.SockSite(runner, sock).start()

    async def stop(self, grace: float) -> None:
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        if self.api_socket is not None:
            await asyncio.to_thread(remove_socket, self.api_socket)

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

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

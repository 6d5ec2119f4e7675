"""The HTTP side port: /healthz (alive), /readyz (dependencies reachable) and /metrics."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from labd.config import HttpSettings
from labd.errors import LabdError

log = structlog.get_logger("labd.http")

Probe = Callable[[], Awaitable[str | None]]
"""A readiness check: None when fine, else the reason it is not."""

PROBE_TIMEOUT = 2.0


class SidePort:
    """A small aiohttp server; components add readiness probes and routes before start."""

    name = "http"

    def __init__(self, settings: HttpSettings, render_metrics: Callable[[], bytes]) -> None:
        self.settings = settings
        self.probes: dict[str, Probe] = {}
        self.app = web.Application()
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)
        self._render_metrics = render_metrics
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def add_probe(self, name: str, probe: Probe) -> None:
        self.probes[name] = probe

    async def start(self) -> None:
        host, port = self.settings.host, self.settings.port
        try:
            sock = socket.create_server((host, port))
        except OSError as e:
            raise LabdError(f"http side port: cannot listen on {host}:{port}: {e.strerror}") from e
        self.port = sock.getsockname()[1]
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()
        log.info("http side port listening", host=host, port=self.port)

    async def stop(self, grace: float) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

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

"""Eideticker's sync screens served by labd itself: a page that is one colour from edge to
edge (`/labd/sync/00ff00`), for devices whose screen labd cannot paint directly (a phone's
browser, reached through `adb reverse`). With `?next=URL` a tap or click anywhere on it loads
that URL: the user's action that starts a page load is an input event on the green page, and
nothing else (no URL bar, no suggestion list) is drawn while the clock runs.

The server runs on the event loop (aiohttp) and answers nothing but these pages.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlsplit

from aiohttp import web

from labd.capture.errors import CaptureError

RGB = tuple[int, int, int]
_HEX = re.compile(r"^[0-9a-fA-F]{6}$")
PAGE = """<!doctype html><html data-labd-sync='#{color}' data-next='{next}'
style='margin:0;height:100%;background:#{color}'><head><meta name='viewport'
content='width=device-width,initial-scale=1,user-scalable=no'><title>labd</title></head>
<body style='margin:0;height:100%;background:#{color}'><script>
const next = document.documentElement.dataset.next;
if (next) for (const e of ['pointerup', 'click'])
  addEventListener(e, () => {{ location.href = next; }}, {{once: true}});
</script></body></html>"""


class SyncPages:
    def __init__(self) -> None:
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self, host: str = "127.0.0.1") -> int:
        """Serve on a free port of `host`; the port."""
        app = web.Application()
        app.router.add_get("/labd/sync/{color}", self._page)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, host, 0)
        await site.start()
        server = site._server  # aiohttp keeps the bound socket here; port 0 needs it
        if server is None or not getattr(server, "sockets", None):
            raise CaptureError("the sync page server did not bind")
        self.port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        return self.port

    def url(self, rgb: RGB, next_url: str = "", host: str = "127.0.0.1") -> str:
        """The page's address as the device sees it (its loopback, once reversed)."""
        color = "{:02x}{:02x}{:02x}".format(*rgb)
        query = f"?next={quote(next_url, safe='')}" if next_url else ""
        return f"http://{host}:{self.port}/labd/sync/{color}{query}"

    async def _page(self, request: web.Request) -> web.Response:
        color = request.match_info["color"]
        if not _HEX.match(color):
            raise web.HTTPNotFound(text=f"{color!r} is not a colour (six hex digits)")
        next_url = request.query.get("next", "")
        if next_url and urlsplit(next_url).scheme not in ("http", "https"):
            raise web.HTTPBadRequest(text="next: only http and https pages")
        body = PAGE.format(color=color.lower(), next=html.escape(next_url, quote=True))
        return web.Response(
            text=body, content_type="text/html", headers={"Cache-Control": "no-store"}
        )

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None

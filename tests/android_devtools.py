"""The stand-in phone's DevTools endpoint: the smallest part of the Chrome DevTools Protocol
labd uses (`/json/list`, a page target's websocket, `Runtime.evaluate` of the Navigation
Timing expression), answered from the phone's last real HTTP navigation, a failed one as
Chrome's error page answers. Reached only as a
phone's would be: `adb forward tcp:N localabstract:chrome_devtools_remote`.

Its targets' `webSocketDebuggerUrl` carries no usable host (as over adb forward, the browser
cannot know the host's port): a client uses only its path.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from aiohttp import WSMsgType, web


class DevTools:
    def __init__(self, phone: Any) -> None:
        self.phone = phone
        self.port = 0
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def address(self) -> tuple[str, int]:
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._serve, daemon=True)
                self.thread.start()
        self.ready.wait(10)
        return "127.0.0.1", self.port

    def _serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        app = web.Application()
        app.router.add_get("/json/list", self._targets)
        app.router.add_get("/json", self._targets)
        app.router.add_get("/devtools/page/{id}", self._page)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.ready.set()
        await asyncio.Event().wait()  # until the process ends (a daemon thread)

    async def _targets(self, request: web.Request) -> web.Response:
        last = self.phone.navigations[-1] if self.phone.navigations else {"url": "about:blank"}
        target = {"id": "1", "type": "page", "url": last["url"], "title": "",
                  "webSocketDebuggerUrl": "ws:///devtools/page/1"}  # fmt: skip
        return web.json_response([target])

    async def _page(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for message in ws:
            if message.type != WSMsgType.TEXT:
                break
            call = json.loads(message.data)
            if call.get("method") == "Runtime.evaluate" and self._busy():
                continue  # as a page still parsing: the evaluation waits, unanswered
            await ws.send_json({"id": call["id"], "result": self._evaluate(call)})
        return ws

    def _busy(self) -> bool:
        last = self.phone.navigations[-1] if self.phone.navigations else {}
        return "started" in last and time.monotonic() < last["started"] + self.phone.busy_ms / 1000

    def _evaluate(self, call: dict[str, Any]) -> dict[str, Any]:
        expression = call.get("params", {}).get("expression", "")
        if call.get("method") != "Runtime.evaluate" or "performance.timing" not in expression:
            return {"result": {"type": "undefined"}}
        last = self.phone.navigations[-1] if self.phone.navigations else {}
        names = ("responseStart", "domInteractive", "domContentLoaded", "load")
        found = {n: round(float(last[n]), 1) if n in last else None for n in names}
        if "load" in last and time.monotonic() < last["started"] + last["load"] / 1000:
            found["load"] = None  # not fired yet
        # As Chrome: a failed fetch, or an HTTP error without a body, shows its error page.
        status = last.get("status") or None
        error = last.get("error") and "ERR_CONNECTION_REFUSED"
        if status and status >= 400 and last.get("empty"):
            error = f"HTTP ERROR {status}"
        page = "chrome-error://chromewebdata/" if error else last.get("url", "about:blank")
        address = last.get("url")  # Navigation Timing's entry names where it went, or failed
        value = json.dumps(
            found | {"page": page, "address": address, "status": status, "error": error}
        )
        return {"result": {"type": "string", "value": value}}

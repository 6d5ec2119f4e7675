"""The browser's own timing marks, beside what the pixels say: Navigation Timing of the page on
screen, read over a websocket (aiohttp) through the browser's remote protocol, Chrome DevTools
for Chromium and WebDriver BiDi for Firefox. Both browsers are started with
`--remote-debugging-port=0` and write the port they chose into the profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

BROWSER_MARKS = ("responseStart", "domInteractive", "domContentLoaded", "load")
# Navigation Timing, in ms from navigationStart (0 when the event has not happened).
TIMING = """(() => { const t = performance.timing, s = t.navigationStart, d = v => v ? v - s : 0;
  return JSON.stringify({responseStart: d(t.responseStart), domInteractive: d(t.domInteractive),
    domContentLoaded: d(t.domContentLoadedEventEnd), load: d(t.loadEventEnd)}); })()"""


async def browser_timing(browser: str, profile: Path) -> dict[str, float]:
    """`browser.<event>` in ms from the navigation's start; {} when the browser does not answer
    (the pixels are the measurement; these marks are a second opinion)."""
    timeout = aiohttp.ClientTimeout(total=5)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            if browser == "firefox":
                value = await _bidi_evaluate(http, profile)
            else:
                value = await _cdp_evaluate(http, profile)
    except (aiohttp.ClientError, TimeoutError, OSError, LookupError, ValueError, TypeError):
        return {}
    return {f"browser.{k}": float(v) for k, v in json.loads(value).items()} if value else {}


async def cdp_timing(port: int) -> dict[str, float]:
    """`browser.<event>` from a Chrome DevTools endpoint on this host port (a phone's Chrome
    through `adb forward`); {} when it does not answer."""
    timeout = aiohttp.ClientTimeout(total=5)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            value = await _cdp_evaluate_at(http, port)
    except (aiohttp.ClientError, TimeoutError, OSError, LookupError, ValueError, TypeError):
        return {}
    return {f"browser.{k}": float(v) for k, v in json.loads(value).items()} if value else {}


async def _cdp_evaluate(http: aiohttp.ClientSession, profile: Path) -> str | None:
    """Chromium: DevToolsActivePort holds the port."""
    port = int((profile / "DevToolsActivePort").read_text().split()[0])
    return await _cdp_evaluate_at(http, port)


async def _cdp_evaluate_at(http: aiohttp.ClientSession, port: int) -> str | None:
    """The first page target evaluates. Only the path of its websocket address is used: over
    adb forward the browser cannot know the host's port."""
    async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
        targets = await r.json()
    page = next(t for t in targets if t.get("type") == "page")
    path = urlsplit(page["webSocketDebuggerUrl"]).path
    async with http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0) as ws:
        params = {"expression": TIMING, "returnByValue": True}
        reply = await _call(ws, 1, "Runtime.evaluate", params)
    value = reply["result"]["result"].get("value")
    return str(value) if value is not None else None


async def _bidi_evaluate(http: aiohttp.ClientSession, profile: Path) -> str | None:
    """Firefox: WebDriverBiDiServer.json holds the port; a session evaluates in the top-level
    browsing context, then ends (one session at a time is allowed)."""
    server = json.loads((profile / "WebDriverBiDiServer.json").read_text())
    url = f"ws://{server['ws_host']}:{server['ws_port']}/session"
    async with http.ws_connect(url, max_msg_size=0) as ws:
        await _call(ws, 1, "session.new", {"capabilities": {}})
        try:
            tree = await _call(ws, 2, "browsingContext.getTree", {"maxDepth": 0})
            context = tree["result"]["contexts"][0]["context"]
            target = {"context": context}
            params = {"expression": TIMING, "target": target, "awaitPromise": False}
            reply = await _call(ws, 3, "script.evaluate", params)
        finally:
            await _call(ws, 4, "session.end", {})
    result = reply["result"]
    if result.get("type") != "success":
        return None
    value = result["result"].get("value")
    return str(value) if value is not None else None


async def _call(
    ws: aiohttp.ClientWebSocketResponse, id_: int, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """One command and its reply (events and other replies in between are skipped)."""
    await ws.send_json({"id": id_, "method": method, "params": params})
    async for message in ws:
        reply: dict[str, Any] = json.loads(message.data)
        if reply.get("id") == id_:
            if "error" in reply:
                raise ValueError(f"{method}: {reply['error']}")
            return reply
    raise ValueError(f"{method}: the connection closed before the reply")

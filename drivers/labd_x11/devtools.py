"""The browser's own timing marks through the Chrome DevTools Protocol (aiohttp's websocket
client): Navigation Timing of the page on screen, beside what the pixels say."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

# Navigation Timing, in ms from navigationStart (0 when the event has not happened).
TIMING = """(() => { const t = performance.timing, s = t.navigationStart, d = v => v ? v - s : 0;
  return JSON.stringify({responseStart: d(t.responseStart), domInteractive: d(t.domInteractive),
    domContentLoaded: d(t.domContentLoadedEventEnd), load: d(t.loadEventEnd)}); })()"""


def devtools_port(profile: Path) -> int | None:
    try:
        return int((profile / "DevToolsActivePort").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


async def navigation_timing(port: int) -> dict[str, float]:
    """Navigation Timing of the first page target; {} when DevTools does not answer."""
    timeout = aiohttp.ClientTimeout(total=5)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                targets = await r.json()
            page = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                await ws.send_json(
                    {
                        "id": 1,
                        "method": "Runtime.evaluate",
                        "params": {"expression": TIMING, "returnByValue": True},
                    }
                )
                async for message in ws:
                    reply = json.loads(message.data)
                    if reply.get("id") == 1:
                        value = reply.get("result", {}).get("result", {}).get("value")
                        return (
                            {f"browser.{k}": float(v) for k, v in json.loads(value).items()}
                            if value
                            else {}
                        )
    except (aiohttp.ClientError, TimeoutError, StopIteration, KeyError, ValueError):
        return {}
    return {}

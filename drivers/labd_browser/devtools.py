"""The browser's own timing marks, beside what the pixels say: Navigation Timing of the page on
screen, read over a websocket (aiohttp) through the browser's remote protocol, Chrome DevTools
for Chromium and WebDriver BiDi for Firefox. Both browsers are started with
`--remote-debugging-port=0` and write the port they chose into the profile.

Every wait on the browser is bounded: a page that holds its script (an alert() open, a loop
that never yields) or whose tab crashed answers nothing, and would otherwise hold the device
until the job's own time-out."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp

from labd.sdk import TestFailure

BROWSER_MARKS = ("responseStart", "domInteractive", "domContentLoaded", "load")
# Navigation Timing, in ms from navigationStart (null when the event has not happened: a huge
# page still parsing), with what says whether the page on screen is the page asked for: its
# document's address (an error page's is the browser's own), the address navigated to last
# (after redirects; on Chromium's error page, where it failed), the HTTP status, and the code
# Chromium's error page shows (ERR_NAME_NOT_RESOLVED, HTTP ERROR 404).
TIMING = """(() => { const t = performance.timing, s = t.navigationStart, d = v => v ? v - s : null;
  const n = performance.getEntriesByType('navigation')[0], page = document.documentURI;
  const code = page.startsWith('chrome-error:') && document.querySelector('.error-code');
  return JSON.stringify({responseStart: d(t.responseStart), domInteractive: d(t.domInteractive),
    domContentLoaded: d(t.domContentLoadedEventEnd), load: d(t.loadEventEnd), page: page,
    address: (n && n.name) || null, status: (n && n.responseStatus) || null,
    error: code ? code.textContent : null}); })()"""
# A page that has been still for quiet_ms answers in milliseconds; the protocol's own commands
# (connect, list targets, end a session) are answered by the browser process, not the page.
ANSWER_S = 5.0


class NoAnswer(Exception):
    """The browser took a command and did not answer it in time."""


class PageSilent(TestFailure):
    """The page took the evaluation and did not answer it in time: a dialog open, a script that
    never yields, or a page still parsing (a page of megabytes holds its script for seconds).
    Before the load event fires it is not yet a verdict: ask again until `load_timeout_s`."""

    def verdict(self, load_timeout_s: float) -> TestFailure:
        """The iteration's failure once the page was still silent at `load_timeout_s`."""
        return TestFailure(f"{self}; asked again until load_timeout_s ({load_timeout_s:g} s)")


# What costs the marks, not the iteration: no port file, nothing listening, no page target, a
# refused command, the browser process itself silent.
UNREACHABLE = (
    aiohttp.ClientError, TimeoutError, OSError, LookupError, ValueError, TypeError, NoAnswer
)  # fmt: skip


@dataclass(frozen=True)
class PageState:
    """The page on screen as the browser sees it."""

    marks: dict[str, float]  # `browser.<event>`: only events that have happened
    page: str  # its document's address
    failure: str | None  # why it is not the page asked for: an error page, an HTTP error

    @property
    def loaded(self) -> bool:
        """Its load event has fired: every subresource the page asked for has come or failed."""
        return "browser.load" in self.marks

    @property
    def navigated(self) -> bool:
        """The page is no longer labd's own sync page (a data: page)."""
        return not self.page.startswith("data:")


async def read_page(browser: str, profile: Path, answer_s: float = ANSWER_S) -> PageState | None:
    """The page on screen, read through the browser's remote protocol; None when that cannot be
    reached (the pixels are the measurement; this is a second opinion). TestFailure, within a
    few times `answer_s`, when its tab crashed or (Firefox) it holds a dialog open; PageSilent
    when the page does not answer: a dialog, a script that never yields, or still parsing."""
    timeout = aiohttp.ClientTimeout(total=answer_s)  # connecting and HTTP; replies: `_call`
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            if browser == "firefox":
                value = await _bidi_evaluate(http, profile, answer_s)
            else:
                text = await asyncio.to_thread(_profile_file, profile / "DevToolsActivePort")
                port = int(text.split()[0])
                value = await _cdp_evaluate_at(http, port, answer_s)
    except UNREACHABLE:
        return None
    return page_state(value)


def page_state(value: str | None) -> PageState | None:
    """TIMING's answer read: an event that has not happened is no mark (as 0 it went into the
    summary and every comparison as a load in 0 ms). None for no answer, or one that is not
    TIMING's (the page's own script can replace JSON.stringify: its word is not taken)."""
    try:
        found = json.loads(value) if value else None
        if not isinstance(found, dict):
            return None
        marks = {f"browser.{k}": float(found[k]) for k in BROWSER_MARKS if found.get(k) is not None}
    except (ValueError, TypeError):
        return None
    if not all(math.isfinite(v) for v in marks.values()):
        return None
    page = str(found.get("page") or "")
    address = str(found.get("address") or "")
    return PageState(marks, page, _failure(page, address, found.get("status"), found.get("error")))


def _failure(page: str, address: str, status: Any, error: Any) -> str | None:
    """Why the page on screen is not the page, naming the address that failed (a redirect's
    target is not the URL asked for), where the browser says it."""
    if page.startswith("chrome-error:"):
        return f"Chromium shows its error page ({error or 'no code'}){_at(address)}"
    if page.startswith(("about:neterror", "about:certerror")):
        query = parse_qs(urlsplit(page).query)
        code, failed = query.get("e", ["no code"])[0], query.get("u", [""])[0]
        return f"Firefox shows its error page ({code}){_at(failed)}"
    if isinstance(status, int) and status >= 400:
        return f"the server answered HTTP {status}{_at(page)}"
    return None


def _at(address: str) -> str:
    return f" at {address}" if address.startswith(("http:", "https:")) else ""


async def cdp_page(port: int, answer_s: float = ANSWER_S) -> PageState | None:
    """The page on screen from a Chrome DevTools endpoint on this host port (a phone's Chrome
    through `adb forward`); None when the endpoint cannot be reached, within a few times
    `answer_s`; PageSilent or a crash's TestFailure as `read_page`."""
    timeout = aiohttp.ClientTimeout(total=answer_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            value = await _cdp_evaluate_at(http, port, answer_s)
    except UNREACHABLE:
        return None
    return page_state(value)


async def _cdp_evaluate_at(http: aiohttp.ClientSession, port: int, answer_s: float) -> str | None:
    """The first page target evaluates. Only the path of its websocket address is used: over
    adb forward the browser cannot know the host's port."""
    async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
        targets = await r.json()
    page = next(t for t in targets if t.get("type") == "page")
    path = urlsplit(page["webSocketDebuggerUrl"]).path
    async with http.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0) as ws:
        events: list[str] = []
        # Enabling the Inspector domain on a crashed target reports the crash at once.
        await _call(ws, 1, "Inspector.enable", {}, answer_s, events)
        if "Inspector.targetCrashed" in events:
            raise TestFailure(CRASHED)
        params = {"expression": TIMING, "returnByValue": True}
        try:
            reply = await _call(ws, 2, "Runtime.evaluate", params, answer_s, events)
        except NoAnswer:
            if "Inspector.targetCrashed" in events:
                raise TestFailure(CRASHED) from None
            # Chromium tells a dialog apart only to a client that watched it open.
            raise PageSilent(
                f"the page did not answer within {answer_s:g} s: a dialog (alert, confirm, "
                "prompt) open, or its script never yields"
            ) from None
    value = reply["result"]["result"].get("value")
    return str(value) if value is not None else None


LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
PROFILE_FILE_MAX = 4096  # the browser writes a port and a path, or a little JSON


def _profile_file(path: Path) -> str:
    """A small file the browser wrote in its profile, which belongs to the job's account: read
    only if it is a regular file of at most PROFILE_FILE_MAX bytes, without following a link or
    waiting on a pipe (a job that made it a FIFO froze labd's event loop). OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > PROFILE_FILE_MAX:
            raise OSError(f"{path.name} is not a small regular file")
        return os.read(fd, PROFILE_FILE_MAX).decode("utf-8", "replace")
    finally:
        os.close(fd)


CRASHED = "the page's tab crashed (the browser shows its error page, not the page)"


async def _bidi_evaluate(http: aiohttp.ClientSession, profile: Path, answer_s: float) -> str | None:
    """Firefox: WebDriverBiDiServer.json holds the port; a session evaluates in the top-level
    browsing context, then ends (one session at a time is allowed)."""
    text = await asyncio.to_thread(_profile_file, profile / "WebDriverBiDiServer.json")
    server = json.loads(text)
    host, port = server["ws_host"], int(server["ws_port"])
    if host not in LOOPBACK:  # the profile is the job's: the browser listens on loopback
        raise ValueError(f"WebDriverBiDiServer.json names {host!r}, not this host's loopback")
    url = f"ws://{host}:{port}/session"
    async with http.ws_connect(url, max_msg_size=0) as ws:
        await _call(ws, 1, "session.new", {"capabilities": {}}, answer_s)
        try:
            tree = await _call(ws, 2, "browsingContext.getTree", {"maxDepth": 0}, answer_s)
            target = {"context": tree["result"]["contexts"][0]["context"]}
            dismiss = {**target, "accept": False}
            try:  # succeeds only when a dialog is open (and closes it)
                await _call(ws, 3, "browsingContext.handleUserPrompt", dismiss, answer_s)
            except ValueError:
                pass  # "no such alert"
            else:
                raise TestFailure(
                    "the page opened a dialog (alert, confirm, prompt) and waits on it"
                )
            params = {"expression": TIMING, "target": target, "awaitPromise": False}
            try:
                reply = await _call(ws, 4, "script.evaluate", params, answer_s)
            except NoAnswer:
                raise PageSilent(
                    f"the page's script did not answer within {answer_s:g} s: it never "
                    "yields (a loop), or its tab hangs"
                ) from None
        finally:
            # The browser process answers this even when the page does not; a session left
            # open would refuse the next iteration's (one at a time). Closing the websocket
            # ends it too, should this go unanswered.
            with contextlib.suppress(*UNREACHABLE):
                await _call(ws, 5, "session.end", {}, answer_s)
    result = reply["result"]
    if result.get("type") != "success":
        return None
    value = result["result"].get("value")
    return str(value) if value is not None else None


async def _call(
    ws: aiohttp.ClientWebSocketResponse,
    id_: int,
    method: str,
    params: dict[str, Any],
    answer_s: float,
    events: list[str] | None = None,
) -> dict[str, Any]:
    """One command and its reply within `answer_s` (NoAnswer otherwise; ValueError for an error
    reply). Events in between are noted in `events` by name; other replies are skipped."""
    await ws.send_json({"id": id_, "method": method, "params": params})
    try:
        async with asyncio.timeout(answer_s):
            async for message in ws:
                reply: dict[str, Any] = json.loads(message.data)
                if reply.get("id") == id_:
                    if "error" in reply:
                        raise ValueError(f"{method}: {reply['error']}")
                    return reply
                if events is not None and "method" in reply:
                    events.append(reply["method"])
    except TimeoutError:
        raise NoAnswer(method) from None
    raise ValueError(f"{method}: the connection closed before the reply")

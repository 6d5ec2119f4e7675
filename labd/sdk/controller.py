"""The platform-neutral controller (Eideticker's): a user's actions over any driver's input.

Scenarios say what a user does (load a URL, tap or click, swipe or scroll, type, launch an
app, show a full-screen colour); the controller turns it into the platform's events. The input
objects come from the drivers (a DesktopInput such as X11's or Windows', a TouchInput such as
Android's); their calls block, so each runs on a thread.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import idna

from labd.errors import UsageError
from labd.sdk.inputs import DesktopInput, TouchInput

# A URL bar updates its suggestions on every key and drops keys that come faster (seen with
# Chromium on Xvfb: "http://www.labd.test/" arrived as "http://test/").
TYPING_DELAY_MS = 5
# Focus moves asynchronously: keys sent at once after Ctrl+L went to the page ("ttp://...").
FOCUS_WAIT_S = 0.2


# An invisible field that has the focus: a URL typed into it and Enter navigate from the page
# itself, so no URL bar or suggestion list is drawn over the screen while the clock runs.
NAVIGATOR = (
    "<input autofocus style='position:absolute;left:-9999px' "
    "onkeydown='if(event.key==\"Enter\")location.href=this.value'>"
)


def color_page(rgb: tuple[int, int, int], navigator: bool = False) -> str:
    """A data: URL of a page that is one colour from edge to edge (Eideticker's sync screens);
    with `navigator`, typing a URL and Enter on it loads that URL."""
    color = "#{:02x}{:02x}{:02x}".format(*rgb)
    style = f"margin:0;height:100%;background:{color}"
    body = NAVIGATOR if navigator else ""
    html = f"<html style='{style}'><body style='margin:0'>{body}</body></html>"
    # UTF-8 declared: a URL typed into the navigator is encoded in the page's charset, and
    # without one "x=é" left as Latin-1 (%E9) and other letters as HTML entities.
    head = "data:text/html;charset=utf-8,"
    return head + quote(html, safe="<>=':;/()")  # no spaces: the URL bar would search


SPECIAL_SCHEMES = {"http", "https", "ws", "wss", "ftp", "file"}  # WHATWG URL's


def ascii_url(url: str) -> str:
    """The same address in ASCII, as a browser sends it (the WHATWG URL standard): a host in
    IDNA (UTS 46, as browsers have it), other characters beyond ASCII percent-encoded as UTF-8.
    Typed so, a URL needs no keycode remapped for characters a desktop's keyboard lacks, nor a
    phone's `input text` to take them."""
    if url.isascii():
        return url
    try:
        parts = urlsplit(url)
    except ValueError:  # "http://[::1/": the browser names what is wrong with it
        parts = None
    # Only a special scheme's host is a domain; "foo://bücher.de" is percent-encoded, as
    # browsers do
    netloc = parts.netloc if parts and parts.scheme.lower() in SPECIAL_SCHEMES else ""
    userinfo, at, host = netloc.rpartition("@")
    if not host.isascii():
        try:
            encoded = idna.encode(host.partition(":")[0], uts46=True).decode("ascii")
        except idna.IDNAError:
            pass  # percent-encoded below: a browser decodes a host's before it checks it
        else:
            port = host.partition(":")[1:]
            url = url.replace(netloc, userinfo + at + encoded + "".join(port), 1)
    return re.sub(r"[^\x00-\x7f]+", lambda m: quote(m.group(), safe=""), url)


class Controller:
    def __init__(
        self,
        device_input: DesktopInput | TouchInput,
        screen: tuple[int, int],
        url_bar: tuple[int, int] | None = None,
        launcher: Callable[[str], None] | None = None,
    ) -> None:
        """`url_bar`: where to tap on a touch device (desktops use Ctrl+L); `launcher`: a
        blocking callable that starts an app by name (the driver's)."""
        if not isinstance(device_input, (DesktopInput, TouchInput)):
            raise TypeError(
                f"{type(device_input).__name__} is neither a DesktopInput (key, text, click, "
                "scroll) nor a TouchInput (tap, swipe, key, text)"
            )
        self.input = device_input
        self.touch = isinstance(device_input, TouchInput)
        self.screen = screen
        self.url_bar = url_bar
        self.launcher = launcher

    async def _do(self, method: str, *args: Any) -> None:
        await asyncio.to_thread(getattr(self.input, method), *args)

    async def focus_url_bar(self) -> None:
        if not self.touch:
            await self._do("key", "ctrl+l")  # focuses the bar and selects what it holds
        elif self.url_bar is not None:
            await self._do("tap", *self.url_bar)
        else:
            raise UsageError("focus the URL bar: a touch device needs the url_bar position")

    async def load_url(self, url: str) -> None:
        """Focus the URL bar, type the URL, Enter: the path a user takes."""
        await self.focus_url_bar()
        await asyncio.sleep(FOCUS_WAIT_S)
        url = ascii_url(url)
        if not self.touch:
            await self._do("text", url, TYPING_DELAY_MS)
        else:
            await self._do("text", url)
        await self._do("key", "Return" if not self.touch else "enter")

    async def tap(self, x: int, y: int) -> None:
        """Tap on touch screens, left click on desktops."""
        await self._do("tap" if self.touch else "click", x, y)

    async def swipe(self, dx: int, dy: int) -> None:
        """Move the content: a swipe from the centre on touch screens, wheel clicks on desktops
        (one per 100 pixels). Positive dy shows what is further down."""
        if self.touch:
            cx, cy = self.screen[0] // 2, self.screen[1] // 2
            await self._do("swipe", cx, cy, cx - dx, cy - dy, 300)
            return
        if dy:
            await self._do("scroll", "down" if dy > 0 else "up", max(1, abs(dy) // 100))
        if dx:
            await self._do("scroll", "right" if dx > 0 else "left", max(1, abs(dx) // 100))

    async def type_text(self, text: str) -> None:
        await self._do("text", text)

    async def launch_app(self, name: str) -> None:
        if self.launcher is None:
            raise UsageError(f"launch {name!r}: this device has no app launcher")
        await asyncio.to_thread(self.launcher, name)

    async def show_color(self, rgb: tuple[int, int, int], navigator: bool = False) -> None:
        """Full-screen colour in the browser: the green (start) and red (end) sync screens."""
        await self.load_url(color_page(rgb, navigator))

    async def press(self, key: str) -> None:
        await self._do("key", key)

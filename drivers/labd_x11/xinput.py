"""Keyboard and mouse input on an X11 display through the XTEST extension (python-xlib).

Works on any DISPLAY the daemon can open, remote ones included (`host:0` over TCP, with
access granted). Text is typed as key events: characters the keyboard map lacks (most of
Unicode) get a spare keycode remapped to them, as xdotool does; remapped keycodes are kept
until `close`, so a client still translating earlier events sees the right symbol. Values are
checked by labd.sdk's one rule for desktop input (the Windows driver's too).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from Xlib import XK, X, display, error
from Xlib.ext import xtest

from labd.sdk import (
    CONTROL_CHARS,
    MAX_CLICKS,
    MAX_COUNT,
    InfrastructureError,
    UsageError,
    check_count,
    check_duration,
    check_point,
    check_text,
    parse_key,
    timed,
)

BUTTONS = {"left": 1, "middle": 2, "right": 3}
SCROLL = {"up": 4, "down": 5, "left": 6, "right": 7}
# A client translates a key event's keycode with the map it fetched on the last MappingNotify,
# when it gets round to it: a keycode remapped again before every client has caught up with
# the previous mapping would be read as the newer symbol. So a remapped keycode is reused only
# this long after its last key event (typing with a delay usually never waits for it).
REMAP_SETTLE_S = 0.2


@dataclass(frozen=True)
class Window:
    id: int
    name: str
    wm_class: tuple[str, ...]
    x: int
    y: int
    width: int
    height: int


def char_keysym(char: str) -> int:
    """The keysym X uses for a character (Latin-1 directly, the rest as 0x01000000 + code)."""
    if char in CONTROL_CHARS:
        return int(XK.string_to_keysym(CONTROL_CHARS[char]))
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 | code


class X11Input:
    def __init__(self, name: str) -> None:
        try:
            self.display = display.Display(name)
        except (error.DisplayError, error.ConnectionClosedError, OSError) as e:
            raise InfrastructureError(f"X11 display {name!r}: cannot open it ({e})") from e
        if not self.display.query_extension("XTEST").present:
            self.display.close()
            raise InfrastructureError(f"X11 display {name!r}: no XTEST extension")
        self.name = name
        screen = self.display.screen()
        self.root = screen.root
        self.size = (screen.width_in_pixels, screen.height_in_pixels)
        # keysym -> spare keycode, least recently used first; when each keycode was last used
        self.remapped: dict[int, int] = {}
        self.used_at: dict[int, float] = {}
        self.spares = self._spare_keycodes()
        self.overlays: list[Any] = []
        # One figure per dispatch: the events sent, up to the server's answer to the sync
        # after them (labd.sdk.TimedInput); a scenario takes them per iteration.
        self.latencies_ms: list[float] = []

    # Pointer ----------------------------------------------------------------------------------

    def move(self, x: int, y: int) -> None:
        check_point(x, y, self.size)
        with timed(self.latencies_ms):
            xtest.fake_input(self.display, X.MotionNotify, x=x, y=y)
            self.display.sync()

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        number = _button(button)
        check_point(x, y, self.size)
        check_count("count", count, MAX_COUNT)
        with timed(self.latencies_ms):
            xtest.fake_input(self.display, X.MotionNotify, x=x, y=y)
            for _ in range(count):
                xtest.fake_input(self.display, X.ButtonPress, number)
                xtest.fake_input(self.display, X.ButtonRelease, number)
            self.display.sync()

    def drag(
        self, x1: int, y1: int, x2: int, y2: int, duration_s: float = 0.2, steps: int = 10
    ) -> None:
        check_point(x1, y1, self.size)
        check_point(x2, y2, self.size)
        check_duration("duration_s", duration_s)
        check_count("steps", steps, MAX_CLICKS)
        with timed(self.latencies_ms):
            xtest.fake_input(self.display, X.MotionNotify, x=x1, y=y1)
            xtest.fake_input(self.display, X.ButtonPress, 1)
            self.display.sync()
        for i in range(1, steps + 1):
            time.sleep(duration_s / steps)
            x, y = x1 + (x2 - x1) * i // steps, y1 + (y2 - y1) * i // steps
            with timed(self.latencies_ms):
                xtest.fake_input(self.display, X.MotionNotify, x=x, y=y)
                self.display.sync()
        with timed(self.latencies_ms):
            xtest.fake_input(self.display, X.ButtonRelease, 1)
            self.display.sync()

    def scroll(self, direction: str, clicks: int = 1) -> None:
        if direction not in SCROLL:
            raise UsageError(f"scroll direction {direction!r}: expected one of {', '.join(SCROLL)}")
        check_count("clicks", clicks, MAX_CLICKS)
        with timed(self.latencies_ms):
            for _ in range(clicks):
                xtest.fake_input(self.display, X.ButtonPress, SCROLL[direction])
                xtest.fake_input(self.display, X.ButtonRelease, SCROLL[direction])
            self.display.sync()

    # Keyboard ---------------------------------------------------------------------------------

    def key(self, combo: str) -> None:
        """A key or a combination: "Return", "ctrl+l", "ctrl+shift+t", "F5" (labd.sdk's key
        names, one character, or "+" for the plus key)."""
        mods, last = parse_key(combo)
        held = [self._keycode(XK.string_to_keysym(name))[0] for name in mods]
        keysym = XK.string_to_keysym(last) if len(last) > 1 else char_keysym(last)
        with timed(self.latencies_ms):
            for code in held:
                xtest.fake_input(self.display, X.KeyPress, code)
            self._tap(keysym)
            for code in reversed(held):
                xtest.fake_input(self.display, X.KeyRelease, code)
            self.display.sync()

    def text(self, text: str, delay_ms: float = 0) -> None:
        """Types the text exactly, whatever it holds: it is keys, never a command line.
        `delay_ms` between characters: fields that react to each key (a browser's URL bar with
        its suggestions) can drop keys sent faster than they handle them. Without a delay the
        whole text is one dispatch (one sync), with one each key is."""
        check_text(text)
        check_duration("delay_ms", delay_ms)
        if not delay_ms:
            with timed(self.latencies_ms):
                for char in text:
                    self._tap(char_keysym(char))
                self.display.sync()
            return
        for char in text:
            with timed(self.latencies_ms):
                self._tap(char_keysym(char))
                self.display.sync()
            time.sleep(delay_ms / 1000)

    def _tap(self, keysym: int) -> None:
        code, shift = self._keycode(keysym)
        shift_code = self.display.keysym_to_keycode(XK.XK_Shift_L) if shift else 0
        if shift:
            xtest.fake_input(self.display, X.KeyPress, shift_code)
        xtest.fake_input(self.display, X.KeyPress, code)
        xtest.fake_input(self.display, X.KeyRelease, code)
        if shift:
            xtest.fake_input(self.display, X.KeyRelease, shift_code)

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs shift); remaps a spare keycode when no key has the symbol."""
        if keysym in self.remapped:
            code = self.remapped[keysym] = self.remapped.pop(keysym)  # now the most recent
        else:
            for code, index in self.display.keysym_to_keycodes(keysym):
                if index in (0, 1):
                    return code, index == 1
            code = self._remap(keysym)
        self.used_at[code] = time.monotonic()
        return code, False

    def _spare_keycodes(self) -> list[int]:
        first = self.display.display.info.min_keycode
        count = self.display.display.info.max_keycode - first + 1
        mapping = self.display.get_keyboard_mapping(first, count)
        return [first + i for i, syms in enumerate(mapping) if not any(syms)]

    def _remap(self, keysym: int) -> int:
        if not self.spares:  # reuse the least recently used remapped keycode
            if not self.remapped:
                raise InfrastructureError(
                    f"X11 display {self.name!r}: no spare keycode to type "
                    f"{_symbol(keysym)!r} with (every keycode of its keyboard map has symbols)"
                )
            oldest = next(iter(self.remapped))
            self.spares.append(self.remapped.pop(oldest))
            self.display.sync()  # the server has the key events sent with it so far
            wait = self.used_at.get(self.spares[0], 0) + REMAP_SETTLE_S - time.monotonic()
            if wait > 0:  # the clients read them with its current mapping
                time.sleep(wait)
        code = self.spares.pop(0)
        self.display.change_keyboard_mapping(code, [(keysym, keysym)])
        self.display.sync()
        self.remapped[keysym] = code
        return code

    # Windows ----------------------------------------------------------------------------------

    def windows(self) -> list[Window]:
        found = []
        stack = [self.root]
        while stack:
            window = stack.pop()
            try:
                stack.extend(window.query_tree().children)
                name = window.get_wm_name()
                wm_class = window.get_wm_class() or ()
                geometry = window.get_geometry()
                attributes = window.get_attributes()
            except error.XError:
                continue  # it went away meanwhile
            if attributes.map_state != X.IsViewable or (not name and not wm_class):
                continue
            origin = window.translate_coords(self.root, 0, 0)
            found.append(
                Window(
                    window.id,
                    str(name or ""),
                    tuple(wm_class),
                    -origin.x,
                    -origin.y,
                    geometry.width,
                    geometry.height,
                )
            )
        return found

    def find_window(self, name: str | None = None, wm_class: str | None = None) -> Window | None:
        """The first viewable window whose title contains `name` and/or whose class is
        `wm_class` (either part of WM_CLASS)."""
        for window in self.windows():
            if name is not None and name not in window.name:
                continue
            if wm_class is not None and wm_class not in window.wm_class:
                continue
            return window
        return None

    def focus(self, window: Window) -> None:
        target = self.display.create_resource_object("window", window.id)
        target.set_input_focus(X.RevertToParent, X.CurrentTime)
        target.configure(stack_mode=X.Above)
        self.display.sync()

    def overlay(self, rgb: tuple[int, int, int]) -> None:
        """A window of one colour over the whole screen, on top of everything (no window
        manager is asked): the end screen, shown at once and the same in every browser."""
        screen = self.display.screen()
        r, g, b = rgb
        window = screen.root.create_window(
            0, 0, screen.width_in_pixels, screen.height_in_pixels, 0, screen.root_depth,
            override_redirect=True, background_pixel=(r << 16) | (g << 8) | b,
        )  # fmt: skip
        window.map()
        window.configure(stack_mode=X.Above)
        self.display.sync()
        self.overlays.append(window)

    def remove_overlays(self) -> None:
        for window in self.overlays:
            window.destroy()
        self.overlays.clear()
        self.display.sync()

    def close(self) -> None:
        if self.overlays:
            self.remove_overlays()
        for code in self.remapped.values():
            self.display.change_keyboard_mapping(code, [(0, 0)])
        self.display.sync()
        self.display.close()


def _symbol(keysym: int) -> str:
    return chr(keysym & 0xFFFFFF) if keysym & 0xFF000000 == 0x01000000 else hex(keysym)


def _button(name: str) -> int:
    if name not in BUTTONS:
        raise UsageError(f"mouse button {name!r}: expected one of {', '.join(BUTTONS)}")
    return BUTTONS[name]

"""Keyboard and mouse input on an X11 display through the XTEST extension (python-xlib).

Works on any DISPLAY the daemon can open, remote ones included (`host:0` over TCP, with
access granted). Text is typed as key events: characters the keyboard map lacks (most of
Unicode) get a spare keycode remapped to them, as xdotool does (keycodes.py shares them between
processes); remapped keycodes are kept until `close`, so a client still translating earlier
events sees the right symbol. Values are checked by labd.sdk's one rule for desktop input (the
Windows driver's too).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

from Xlib import XK, X, display, error
from Xlib.ext import xtest

from labd.sdk import (
    CONTROL_CHARS,
    MAX_CLICKS,
    MAX_COUNT,
    MAX_INPUT_S,
    InfrastructureError,
    UsageError,
    check_count,
    check_duration,
    check_point,
    check_typing,
    parse_key,
    timed,
)
from labd_x11.keycodes import SpareKeycodes

BUTTONS = {"left": 1, "middle": 2, "right": 3}
SCROLL = {"up": 4, "down": 5, "left": 6, "right": 7}
# A client applies a new keyboard map some time after the server has it (Chromium, on a loaded
# host, translated remapped keys with the previous map: 24 of 600 CJK characters), and an Xlib
# client (Tk) fetches the map when it reads the MappingNotify, however late (a keycode remapped
# again before then reads as the newer symbol: a batch of 19 in 2 of 15 runs with 0.2 s, Tk on
# a loaded host). So held keycodes get their symbols a batch at a time: every missing character
# coming that they can take at once, MAP_SETTLE_S before the batch's keys; and new symbols, or
# none at `close`, only once all of them were used, READ_SETTLE_S after the last key.
MAP_SETTLE_S = 0.2
READ_SETTLE_S = 1.0
BATCH = 64  # distinct missing characters looked for ahead (Xvfb's map has 19 spare keycodes)
KEYPAD = range(0xFF80, 0xFFBE)  # KP_Space .. KP_9: their second symbol needs Num Lock


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
        self.keycodes = SpareKeycodes(self.display)
        self.keys = self._read_keyboard()  # read again by each key() and text()
        self.remapped: dict[int, int] = {}  # keysym -> held keycode mapped to it
        self.free: list[int] = []  # held keycodes that may take a new symbol
        self.deadline = math.inf  # when a text must be typed by (MAX_INPUT_S)
        self.last_press = 0.0  # of a held keycode (time.monotonic)
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
        check_duration("duration_s", duration_s, MAX_INPUT_S)
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
        self.keys = self._read_keyboard()
        keysym = XK.string_to_keysym(last) if len(last) > 1 else char_keysym(last)
        # Every keycode found (or mapped) before any key goes down: an error leaves none held.
        held = [self._keycode(XK.string_to_keysym(name))[0] for name in mods]
        code, shifted = self._keycode(keysym)
        keypad = shifted and keysym in KEYPAD  # KP_7, not KP_Home: Num Lock, not Shift
        with timed(self.latencies_ms), contextlib.ExitStack() as locks:
            if len(last) == 1:
                locks.enter_context(self._lock(XK.XK_Caps_Lock, on=False))
            if keypad:
                # Without a Num Lock modifier on the display, Shift picks the digit (X's rule).
                keypad = locks.enter_context(self._lock(XK.XK_Num_Lock, on=True))
            for held_code in held:
                xtest.fake_input(self.display, X.KeyPress, held_code)
            self._press(code, shifted and not keypad)
            for held_code in reversed(held):
                xtest.fake_input(self.display, X.KeyRelease, held_code)
            self.display.sync()

    def text(self, text: str, delay_ms: float = 0) -> None:
        """Types the text exactly, whatever it holds: it is keys, never a command line.
        `delay_ms` between characters: fields that react to each key (a browser's URL bar with
        its suggestions) can drop keys sent faster than they handle them. Without a delay the
        whole text is one dispatch (one sync), with one each key is. A character that cannot
        be typed on this display is an error before any key is sent."""
        check_typing(text, delay_ms)
        self.keys = self._read_keyboard()
        keysyms = [char_keysym(char) for char in text]
        first = next((i for i, keysym in enumerate(keysyms) if self._missing(keysym)), None)
        if first is not None:
            self._map(list(islice(keysyms, first, first + BATCH)))
            self._check_remaps(keysyms, len(text) * delay_ms / 1000)
        self.deadline = time.monotonic() + MAX_INPUT_S
        try:
            self._type(keysyms, delay_ms)
        finally:
            self.deadline = math.inf

    def _type(self, keysyms: list[int], delay_ms: float) -> None:
        with self._lock(XK.XK_Caps_Lock, on=False):
            if not delay_ms:
                with timed(self.latencies_ms):
                    for i, keysym in enumerate(keysyms):
                        self._press(*self._keycode(keysym, islice(keysyms, i, None)))
                    self.display.sync()
                return
            for i, keysym in enumerate(keysyms):
                with timed(self.latencies_ms):
                    self._press(*self._keycode(keysym, islice(keysyms, i, None)))
                    self.display.sync()
                time.sleep(delay_ms / 1000)

    def _check_remaps(self, keysyms: list[int], typing_s: float) -> None:
        """Refuses, before any key, a text whose characters the keyboard lacks are more than
        its spare keycodes can take within MAX_INPUT_S: each time they are all used, clients
        are given READ_SETTLE_S and MAP_SETTLE_S before the keycodes take new symbols."""
        lacking = len({keysym for keysym in keysyms if keysym not in self.keys})
        spare = len(self.keycodes.held)
        waits = (math.ceil(lacking / spare) - 1) * (READ_SETTLE_S + MAP_SETTLE_S)
        if typing_s + waits > MAX_INPUT_S:
            raise UsageError(
                f"X11 display {self.name!r}: text with {lacking} distinct characters its "
                f"keyboard lacks would take at least {typing_s + waits:.0f} s, typed with "
                f"{spare} spare keycodes mapped again each time all are used "
                f"({READ_SETTLE_S + MAP_SETTLE_S:g} s each): at most {MAX_INPUT_S:g} s in "
                "one call"
            )

    @contextlib.contextmanager
    def _lock(self, lock: int, on: bool) -> Iterator[bool]:
        """Caps Lock or Num Lock `on` or off while the block types, as it was after (Caps Lock
        would invert letters; a keypad digit is Num Lock's). As xdotool does. Yields whether
        the lock is as asked: False where the display has no such modifier."""
        code = self.keys.get(lock, (0, 0))[0]
        modifiers = self.display.get_modifier_mapping()  # the keycodes of each modifier bit
        mask = next((1 << i for i, codes in enumerate(modifiers) if code in codes), 0)
        toggle = bool(code and mask) and bool(self.root.query_pointer().mask & mask) != on
        if toggle:
            xtest.fake_input(self.display, X.KeyPress, code)
            xtest.fake_input(self.display, X.KeyRelease, code)
        try:
            yield bool(code and mask)
        finally:
            if toggle:
                xtest.fake_input(self.display, X.KeyPress, code)
                xtest.fake_input(self.display, X.KeyRelease, code)
                self.display.sync()

    def _press(self, code: int, shifted: bool) -> None:
        shift_code = self.keys.get(XK.XK_Shift_L, (0, 0))[0] if shifted else 0
        if shifted:
            xtest.fake_input(self.display, X.KeyPress, shift_code)
        xtest.fake_input(self.display, X.KeyPress, code)
        xtest.fake_input(self.display, X.KeyRelease, code)
        if shifted:
            xtest.fake_input(self.display, X.KeyRelease, shift_code)

    def _keycode(self, keysym: int, coming: Iterable[int] = ()) -> tuple[int, bool]:
        """(keycode, needs shift); maps held spare keycodes when no key has the symbol."""
        if self._missing(keysym):
            self._map([keysym, *islice(coming, BATCH)])
        code = self.remapped.get(keysym)
        if code is not None:
            self.last_press = time.monotonic()
            return code, False
        code, index = self.keys[keysym]
        return code, index == 1

    def _read_keyboard(self) -> dict[int, tuple[int, int]]:
        """The keyboard map as it is now; held keycodes whose symbol someone else changed (a
        new layout emptied them) are typed with no more: mapped again if empty."""
        keys = self.keycodes.keyboard()
        lost = self.keycodes.lost
        if lost:
            self.remapped = {k: c for k, c in self.remapped.items() if c not in lost}
            self.free = [c for c in self.free if c not in lost]
            self.free += [code for code in lost if code in self.keycodes.held]  # empty again
            lost.clear()
        return keys

    def _missing(self, keysym: int) -> bool:
        return keysym not in self.remapped and keysym not in self.keys

    def _map(self, coming: list[int]) -> None:
        """Gives held keycodes the missing symbols of `coming`, as many as they take, from the
        first; waits for the clients to apply the new map."""
        wanted = self._wanted(coming)
        if not self.keycodes.held:  # a share claimed once: others may type there too
            self.free += self.keycodes.claim(len(wanted))
        if not self.free:
            if not self.keycodes.held:
                others = self.keycodes.taken_by_others()
                why = (
                    f"its {others} spare ones are held by other labd processes typing there"
                    if others
                    else "every keycode of its keyboard map has a symbol"
                )
                raise UsageError(
                    f"X11 display {self.name!r}: no spare keycode to type "
                    f"{_symbol(coming[0])!r} with: {why}"
                )
            if time.monotonic() + READ_SETTLE_S + MAP_SETTLE_S > self.deadline:
                raise UsageError(
                    f"X11 display {self.name!r}: text stopped at {_symbol(coming[0])!r}: "
                    f"its characters the keyboard lacks came back too often for its "
                    f"{len(self.keycodes.held)} spare keycodes to type them within "
                    f"{MAX_INPUT_S:g} s"
                )
            self.display.sync()  # the server has every key event sent with them
            time.sleep(max(0.0, self.last_press + READ_SETTLE_S - time.monotonic()))
            self.free = sorted(self.keycodes.held)
            self.remapped.clear()
            wanted = self._wanted(coming)
        batch = dict(zip(self.free, wanted, strict=False))
        self.free = self.free[len(batch) :]
        self.keycodes.map(batch)
        self.remapped.update((keysym, code) for code, keysym in batch.items())
        time.sleep(MAP_SETTLE_S)

    def _wanted(self, coming: list[int]) -> list[int]:
        """The distinct symbols of `coming` that no key has, in order, at most BATCH."""
        wanted: dict[int, None] = {}
        for keysym in coming:
            if keysym not in wanted and self._missing(keysym):
                wanted[keysym] = None
                if len(wanted) == BATCH:
                    break
        return list(wanted)

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
        if self.keycodes.held:  # emptied only once the clients have read the keys typed with
            self.display.sync()  # them (Chromium read the last 10 of 600 CJK characters wrong)
            time.sleep(max(0.0, self.last_press + READ_SETTLE_S - time.monotonic()))
        self.keycodes.release()
        self.display.close()


def _symbol(keysym: int) -> str:
    """The character of a keysym char_keysym made."""
    return chr(keysym & 0xFFFFFF if keysym & 0xFF000000 == 0x01000000 else keysym)


def _button(name: str) -> int:
    if name not in BUTTONS:
        raise UsageError(f"mouse button {name!r}: expected one of {', '.join(BUTTONS)}")
    return BUTTONS[name]

"""The spare keycodes of an X display, shared by every labd process that types on it.

A character the keyboard map lacks is typed by giving a spare keycode (one without symbols)
the character's keysym, as xdotool does. Which keycodes each labd process holds is written on
the display itself: a property of the root window listing (holder, keycode) pairs, the holder
a window of that process, which the X server destroys when the process's connection ends. So
two processes typing on one display never take the same keycode, and the keycodes a killed
process left mapped are emptied by the next one that opens the display (a device's health
check does).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from Xlib import X, Xatom, error

REGISTRY = "_LABD_KEYCODES"


class SpareKeycodes:
    def __init__(self, display: Any) -> None:
        self.display = display
        self.root = display.screen().root
        self.atom = display.intern_atom(REGISTRY)
        self.holder: Any = None  # this process's window, made at its first claim
        self.held: list[int] = []
        if self.root.get_full_property(self.atom, Xatom.CARDINAL) is None:
            return  # nothing held: no grab (discovery opens displays while jobs measure)
        with self._grabbed():
            live, emptied = self._live()
            if emptied:
                self._write(live)

    def claim(self, count: int) -> list[int]:
        """Up to `count` spare keycodes, now held by this process; none when the display has
        none left."""
        if self.holder is None:
            self.holder = self.root.create_window(
                0, 0, 1, 1, 0, 0, window_class=X.InputOnly, visual=X.CopyFromParent
            )
        with self._grabbed():
            entries, _ = self._live()
            taken = {code for _, code in entries}
            first = self.display.display.info.min_keycode
            mapping = self.display.get_keyboard_mapping(
                first, self.display.display.info.max_keycode - first + 1
            )
            spare = [code for code, syms in enumerate(mapping, first) if not any(syms)]
            claimed = [code for code in spare if code not in taken][:count]
            if claimed:
                self._write([*entries, *((self.holder.id, code) for code in claimed)])
        self.held += claimed
        return claimed

    def taken_by_others(self) -> int:
        """How many keycodes other live labd processes hold on this display."""
        with self._grabbed():
            live, _ = self._live()
        return sum(holder != getattr(self.holder, "id", None) for holder, _ in live)

    def release(self) -> None:
        """Empties the keycodes this process holds and gives them back."""
        if not self.held:
            return
        with self._grabbed():
            for code in self.held:
                self.display.change_keyboard_mapping(code, [(0, 0)])
            live, _ = self._live()
            self._write([entry for entry in live if entry[0] != self.holder.id])
        self.held.clear()

    def _live(self) -> tuple[list[tuple[int, int]], int]:
        """The registry's (holder, keycode) pairs whose holder is alive, and how many keycodes
        of the others were emptied (their process ended without giving them back)."""
        found = self.root.get_full_property(self.atom, Xatom.CARDINAL)
        values = [int(v) for v in found.value] if found is not None else []
        alive: dict[int, bool] = {}
        live, emptied = [], 0
        for holder, code in zip(values[::2], values[1::2], strict=False):
            if holder not in alive:
                alive[holder] = holder == getattr(self.holder, "id", None) or self._exists(holder)
            if alive[holder]:
                live.append((holder, code))
            else:
                self.display.change_keyboard_mapping(code, [(0, 0)])
                emptied += 1
        return live, emptied

    def _exists(self, window: int) -> bool:
        try:
            self.display.create_resource_object("window", window).get_geometry()
        except error.XError:
            return False
        return True

    def _write(self, entries: list[tuple[int, int]]) -> None:
        if entries:
            values = [value for entry in entries for value in entry]
            self.root.change_property(self.atom, Xatom.CARDINAL, 32, values)
        else:
            self.root.delete_property(self.atom)

    @contextlib.contextmanager
    def _grabbed(self) -> Iterator[None]:
        """No other client's request in between (another labd reading the registry)."""
        self.display.grab_server()
        try:
            yield
        finally:
            self.display.ungrab_server()
            self.display.sync()

"""The spare keycodes of an X display, shared by every labd process that types on it.

A character the keyboard map lacks is typed by giving a spare keycode (one without symbols)
the character's keysym, as xdotool does. Which keycodes each labd process holds is written on
the display itself: a property of the root window listing (holder, token, keycode, keysym),
the holder a window of that process carrying the token (a random number), which the X server
destroys when the process's connection ends. A holder is alive while its window exists with
its token (a later client given the same window id has no token). So two processes typing on
one display never take the same keycode, and the keycodes a killed process left mapped are
emptied by the next one that opens the display (a device's health check does): only while they
still carry the symbol labd gave them (a user may have given one a key since).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Any

from Xlib import X, Xatom, error

REGISTRY = "_LABD_KEYCODES"
TOKEN = "_LABD_KEYCODES_HOLDER"

Entry = tuple[int, int, int, int]  # holder window, its token, keycode, keysym it was given


class SpareKeycodes:
    def __init__(self, display: Any) -> None:
        self.display = display
        self.root = display.screen().root
        self.atom = display.intern_atom(REGISTRY)
        self.token_atom = display.intern_atom(TOKEN)
        self.first = display.display.info.min_keycode
        self.last = display.display.info.max_keycode
        self.holder: Any = None  # this process's window, made at its first claim
        self.token = secrets.randbits(32)
        self.held: list[int] = []
        self.symbols: dict[int, int] = {}  # held keycode -> the keysym this process gave it
        self.lost: set[int] = set()  # held keycodes whose symbol someone else changed
        if self.root.get_full_property(self.atom, Xatom.CARDINAL) is None:
            return  # nothing held: no grab (discovery opens displays while jobs measure)
        with self._grabbed():
            live, dropped = self._live()
            if dropped:
                self._write(live)

    def keyboard(self) -> dict[int, tuple[int, int]]:
        """keysym -> (keycode, index 0 or 1: shifted) of the display's keyboard map as it is
        now, without the keycodes labd processes hold (another's is remapped at any time).
        Held keycodes of this process whose symbol someone else changed (a new layout) are
        put in `lost`, and given up unless they are empty."""
        registered = {entry[2] for entry in self._entries()}
        keys: dict[int, tuple[int, int]] = {}
        mapping = self.display.get_keyboard_mapping(self.first, self.last - self.first + 1)
        for code, syms in enumerate(mapping, self.first):
            if code not in registered:
                for index, keysym in enumerate(syms[:2]):
                    if keysym and (keysym not in keys or keys[keysym][1] > index):
                        keys[keysym] = (code, index)
        for code, keysym in list(self.symbols.items()):
            now = mapping[code - self.first][0]
            if now != keysym:
                self.lost.add(code)
                del self.symbols[code]
                if now:  # someone's key now: not ours to empty
                    self.held.remove(code)
        return keys

    def claim(self, count: int) -> list[int]:
        """Up to `count` spare keycodes, at most half of those free (others may type too), now
        held by this process; none when the display has none left."""
        if self.holder is None:
            self.holder = self.root.create_window(
                0, 0, 1, 1, 0, 0, window_class=X.InputOnly, visual=X.CopyFromParent
            )
            self.holder.change_property(self.token_atom, Xatom.CARDINAL, 32, [self.token])
        with self._grabbed():
            entries, _ = self._live()
            taken = {entry[2] for entry in entries}
            mapping = self.display.get_keyboard_mapping(self.first, self.last - self.first + 1)
            spare = [code for code, syms in enumerate(mapping, self.first) if not any(syms)]
            free = [code for code in spare if code not in taken]
            claimed = free[: min(count, (len(free) + 1) // 2)]
            if claimed:
                mine = ((self.holder.id, self.token, code, 0) for code in claimed)
                self._write([*entries, *mine])
        self.held += claimed
        return claimed

    def map(self, symbols: dict[int, int]) -> None:
        """Gives held keycodes these keysyms (keycode -> keysym), written in the registry
        first: a process killed in between leaves nothing it cannot tell as its own."""
        with self._grabbed():
            live, _ = self._live()
            self._write([(*entry[:3], symbols.get(entry[2], entry[3])) for entry in live])
            for code, keysym in symbols.items():
                self.display.change_keyboard_mapping(code, [(keysym, keysym)])
        self.symbols.update(symbols)

    def taken_by_others(self) -> int:
        """How many keycodes other live labd processes hold on this display."""
        with self._grabbed():
            live, _ = self._live()
        return sum(not self._mine(entry) for entry in live)

    def release(self) -> None:
        """Empties the keycodes this process holds (those still carrying what it gave them)
        and gives them back."""
        if self.holder is None:
            return
        with self._grabbed():
            mapping = self.display.get_keyboard_mapping(self.first, self.last - self.first + 1)
            for code in self.held:
                if mapping[code - self.first][0] == self.symbols.get(code, 0):
                    self.display.change_keyboard_mapping(code, [(0, 0)])
            live, _ = self._live()
            self._write([entry for entry in live if not self._mine(entry)])
        self.held.clear()
        self.symbols.clear()

    def _entries(self) -> list[Entry]:
        """The registry as written; entries naming no keycode of this display left out."""
        found = self.root.get_full_property(self.atom, Xatom.CARDINAL)
        if found is None or found.format != 32:
            return []
        values = [int(v) for v in found.value]
        quads = zip(values[::4], values[1::4], values[2::4], values[3::4], strict=False)
        return [entry for entry in quads if self.first <= entry[2] <= self.last]

    def _live(self) -> tuple[list[Entry], int]:
        """The registry's entries whose holder is alive, and how many of the others were
        dropped (their process ended without giving their keycodes back); the keycodes of
        those are emptied if they still carry the symbol labd gave them."""
        alive: dict[tuple[int, int], bool] = {}
        live: list[Entry] = []
        dead: list[Entry] = []
        for entry in self._entries():
            holder, token = entry[:2]
            if (holder, token) not in alive:
                alive[holder, token] = self._mine(entry) or self._alive(holder, token)
            (live if alive[holder, token] else dead).append(entry)
        if dead:
            mapping = self.display.get_keyboard_mapping(self.first, self.last - self.first + 1)
            for _, _, code, keysym in dead:
                if keysym and mapping[code - self.first][0] == keysym:
                    self.display.change_keyboard_mapping(code, [(0, 0)])
        return live, len(dead)

    def _mine(self, entry: Entry) -> bool:
        return self.holder is not None and entry[:2] == (self.holder.id, self.token)

    def _alive(self, holder: int, token: int) -> bool:
        try:
            window = self.display.create_resource_object("window", holder)
            found = window.get_full_property(self.token_atom, Xatom.CARDINAL)
        except error.XError:
            return False  # no such window: its process has ended
        return found is not None and list(found.value) == [token]

    def _write(self, entries: list[Entry]) -> None:
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

"""What a device's input looks like to a scenario: keys, a pointer, a touch screen.

Drivers implement these structurally (no base class to inherit): X11's XTEST input, Windows'
SendInput, Android's persistent shell. The calls block (they talk to a display server or a
device), so async code runs them on a thread; the Controller does.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Protocol, runtime_checkable

from labd.errors import UsageError
from labd.visible import quoted


@runtime_checkable
class KeyInput(Protocol):
    """A keyboard: single keys and combinations ("Return", "ctrl+l", "F5"), and text typed
    exactly as given (it is keys, never a command line)."""

    def key(self, combo: str) -> None: ...

    def text(self, text: str, delay_ms: float = 0) -> None:
        """`delay_ms` between characters: a field that reacts to every key (a URL bar with
        its suggestions) drops keys sent faster than it handles them."""


@runtime_checkable
class PointerInput(Protocol):
    """A mouse: clicks at screen coordinates and wheel clicks (up, down, left, right)."""

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None: ...

    def scroll(self, direction: str, clicks: int = 1) -> None: ...


@runtime_checkable
class DesktopInput(KeyInput, PointerInput, Protocol):
    """A desktop's keyboard and mouse together."""


@runtime_checkable
class TouchInput(Protocol):
    """A touch screen with its hardware keys ("enter", "back", "home")."""

    def tap(self, x: int, y: int) -> None: ...

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int = 300) -> None: ...

    def key(self, name: str) -> None: ...

    def text(self, text: str) -> None: ...


# What input values are valid, one rule for every desktop driver (X11 and Windows check with
# these, so a job that runs on one is not refused, or typed differently, on the other).

# Named keys, by their X keysym names (the names the protocol documents: "Return", "F5");
# looked up without case, "_", "-" or spaces, so "pageup", "Page_Up" and "page-up" agree.
_NAMED = [
    "Return", "Tab", "BackSpace", "Escape", "space", "Delete", "Insert", "Home", "End",
    "Page_Up", "Page_Down", "Left", "Up", "Right", "Down", "Menu", "Print", "Pause",
    "Caps_Lock", "Num_Lock", "Scroll_Lock", *(f"F{n}" for n in range(1, 25)),
    "Control_L", "Control_R", "Shift_L", "Shift_R", "Alt_L", "Alt_R", "Super_L", "Super_R",
    "Meta_L", "Meta_R", "KP_Enter", "KP_Add", "KP_Subtract", "KP_Multiply", "KP_Divide",
    "KP_Decimal", *(f"KP_{n}" for n in range(10)),
]  # fmt: skip
_ALIASES = {
    "enter": "Return", "esc": "Escape", "del": "Delete", "ins": "Insert", "prior": "Page_Up",
    "pgup": "Page_Up", "next": "Page_Down", "pgdn": "Page_Down", "printscreen": "Print",
    "ctrl": "Control_L", "control": "Control_L", "shift": "Shift_L", "alt": "Alt_L",
    "super": "Super_L", "win": "Super_L", "meta": "Meta_L",
}  # fmt: skip
KEY_NAMES: dict[str, str] = {
    **{name.lower().replace("_", ""): name for name in _NAMED},
    **_ALIASES,
}
MODIFIERS = {"ctrl": "Control_L", "control": "Control_L", "shift": "Shift_L", "alt": "Alt_L",
             "super": "Super_L", "win": "Super_L", "meta": "Meta_L"}  # fmt: skip
# Characters of a text that are keys rather than symbols: "\n" is Return on every desktop.
CONTROL_CHARS = {"\n": "Return", "\t": "Tab", "\b": "BackSpace", "\x1b": "Escape"}
MAX_CLICKS = 1000  # wheel clicks in one scroll: a page's length many times over
MAX_COUNT = 10  # clicks at one point (a triple click selects a paragraph)
# One input call blocks its thread until done, which a job's time-out cannot interrupt: a drag,
# or a text at its delay, may take this long at most; a text this many characters (a form's).
MAX_INPUT_S = 60.0
MAX_TEXT = 10_000
MAX_DELAY_MS = 1000.0  # between two characters


def parse_key(combo: str) -> tuple[tuple[str, ...], str]:
    """(modifiers, key) of "ctrl+shift+t", "Return" or "+": the modifiers as X keysym names
    ("Control_L"), the key as a name of `KEY_NAMES`' values or one character; a UsageError
    naming the combination and the part that is wrong otherwise."""
    if not isinstance(combo, str) or not combo:
        raise UsageError(f"key {quoted(combo)}: expected a key name like 'Return' or 'ctrl+l'")
    # "ctrl + l" and "ctrl + +" as "ctrl+l" and "ctrl++"; "ctrl+ " is ctrl and the space key
    keys = re.sub(r"\s+(?=\+)|(?<=\+)\s+(?=\S)", "", combo)
    if keys.endswith("++") or keys == "+":  # the "+" key itself
        parts = [*keys[:-2].split("+"), "+"] if keys != "+" else ["+"]
    else:
        parts = keys.split("+")
    *mods, last = [part.strip() or part for part in parts]
    if mods and last.isalpha() and len(last) == 1:
        last = last.lower()  # "Ctrl+T" is ctrl and t, as menus write it; shift is said
    held = []
    for mod in mods:
        if mod.lower() not in MODIFIERS:
            raise UsageError(
                f"key {quoted(combo)}: unknown modifier {quoted(mod)} "
                f"(expected {', '.join(MODIFIERS)})"
            )
        if MODIFIERS[mod.lower()] in held:  # "shift+shift+x": a typo, said as one
            raise UsageError(f"key {quoted(combo)}: modifier {quoted(mod)} given twice")
        held.append(MODIFIERS[mod.lower()])
    if not last:
        raise UsageError(f"key {quoted(combo)}: no key after the modifiers")
    if len(last) == 1:
        if last in CONTROL_CHARS:
            return tuple(held), CONTROL_CHARS[last]
        if last == " ":
            return tuple(held), "space"
        if not _typeable(last):
            raise UsageError(f"key {quoted(combo)}: {quoted(last)} is not a key")
        return tuple(held), last
    name = KEY_NAMES.get(last.lower().replace("_", "").replace("-", "").replace(" ", ""))
    if name is None:
        raise UsageError(
            f"key {quoted(combo)}: no key named {quoted(last)} (one character, or a name like "
            "Return, Tab, Escape, Page_Up, Home, Left, F5)"
        )
    if name in held:  # "ctrl+ctrl": the key is a modifier already held
        raise UsageError(f"key {quoted(combo)}: {quoted(last)} is held already as a modifier")
    return tuple(held), name


def check_text(text: str) -> str:
    """The text, if every character can be typed: no lone surrogate (half of a UTF-16 pair),
    no control character other than "\\n" (Return), "\\t", "\\b" and "\\x1b" (Escape), at most
    MAX_TEXT characters."""
    if not isinstance(text, str):
        raise UsageError(f"text {text!r}: expected a string")
    if len(text) > MAX_TEXT:
        raise UsageError(f"text of {len(text)} characters: at most {MAX_TEXT} in one call")
    for i, char in enumerate(text):
        if char not in CONTROL_CHARS and not _typeable(char):
            raise UsageError(f"text: {char!r} at position {i} cannot be typed")
    return text


def check_point(x: object, y: object, screen: tuple[int, int]) -> tuple[int, int]:
    """(x, y) if both are whole numbers of pixels on a screen of this (width, height)."""
    for name, value, size in (("x", x, screen[0]), ("y", y, screen[1])):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < size:
            raise UsageError(
                f"{name}={value!r}: expected a whole number of pixels from 0 to {size - 1} "
                f"(the screen is {screen[0]}x{screen[1]})"
            )
    return x, y  # type: ignore[return-value]  # both checked to be int just above


def check_duration(name: str, value: object, most: float = math.inf) -> float:
    """`value` if it is a finite number from 0 to `most` (a delay or a duration)."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not 0 <= value <= most
    ):
        bounds = f"from 0 to {most:g}" if math.isfinite(most) else ">= 0"
        raise UsageError(f"{name}={value!r}: expected a finite number {bounds}")
    return float(value)


def check_typing(text: str, delay_ms: object) -> tuple[str, float]:
    """(text, delay_ms) if the text can be typed (check_text) at this delay between its
    characters within MAX_INPUT_S."""
    check_text(text)
    delay = check_duration("delay_ms", delay_ms, MAX_DELAY_MS)
    if len(text) * delay / 1000 > MAX_INPUT_S:
        raise UsageError(
            f"text of {len(text)} characters at delay_ms={delay_ms!r} would take "
            f"{len(text) * delay / 1000:g} s: at most {MAX_INPUT_S:g} s in one call"
        )
    return text, delay


def check_count(name: str, value: object, most: int) -> int:
    """`value` if it is a whole number from 1 to `most` (clicks, wheel clicks, drag steps)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise UsageError(f"{name}={value!r}: expected a whole number from 1 to {most}")
    return value


def _typeable(char: str) -> bool:
    # Cs: half of a surrogate pair, which no keyboard types; Cc: control characters. Format
    # characters (Cf: the zero-width joiner of emoji sequences) are typed as they are.
    return unicodedata.category(char) not in ("Cs", "Cc")

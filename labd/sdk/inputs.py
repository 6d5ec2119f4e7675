"""What a device's input looks like to a scenario: keys, a pointer, a touch screen.

Drivers implement these structurally (no base class to inherit): X11's XTEST input, Windows'
SendInput, Android's persistent shell. The calls block (they talk to a display server or a
device), so async code runs them on a thread; the Controller does.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


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

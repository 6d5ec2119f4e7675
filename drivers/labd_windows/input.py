"""A Windows desktop's keyboard and mouse for the controller (a labd.sdk.DesktopInput): each
action is built as SendInput events (sendinput.py) and handed to `send`, which injects them
(user32.SendInput on Windows; a recorder in tests)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from labd.sdk import MAX_CLICKS, MAX_COUNT, UsageError, check_count, check_typing
from labd_windows.sendinput import INPUT, click_inputs, combo_inputs, scroll_inputs, text_inputs

Send = Callable[[Sequence[INPUT]], None]
# Wheel directions: SendInput scrolls up (or right) for positive clicks.
SCROLL = {"up": (1, False), "down": (-1, False), "right": (1, True), "left": (-1, True)}


class WindowsInput:
    def __init__(self, send: Send, screen: tuple[int, int]) -> None:
        self.send = send
        self.screen = screen  # pixels, for SendInput's 0..65535 absolute coordinates

    def key(self, combo: str) -> None:
        """A key or a combination: "Return", "ctrl+l", "F5"."""
        self.send(combo_inputs(combo))

    def text(self, text: str, delay_ms: float = 0) -> None:
        """Exactly this text, as Unicode key events (no keyboard layout involved), "\n" as
        Return."""
        check_typing(text, delay_ms)
        if not delay_ms:
            self.send(text_inputs(text))
            return
        for char in text:
            self.send(text_inputs(char))
            time.sleep(delay_ms / 1000)

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        move, down, up = click_inputs(x, y, self.screen, button)
        check_count("count", count, MAX_COUNT)
        self.send([move, *[down, up] * count])

    def scroll(self, direction: str, clicks: int = 1) -> None:
        if direction not in SCROLL:
            raise UsageError(f"scroll direction {direction!r}: expected one of {', '.join(SCROLL)}")
        check_count("clicks", clicks, MAX_CLICKS)
        sign, horizontal = SCROLL[direction]
        self.send(scroll_inputs(sign * clicks, horizontal))

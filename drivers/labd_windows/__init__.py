"""Windows desktops: keys, Unicode text and mouse through SendInput (ctypes only)."""

from labd_windows.sendinput import (
    INPUT,
    KEYBDINPUT,
    MOUSEINPUT,
    click_inputs,
    combo_inputs,
    scroll_inputs,
    send,
    text_inputs,
)

__all__ = [
    "INPUT",
    "KEYBDINPUT",
    "MOUSEINPUT",
    "click_inputs",
    "combo_inputs",
    "scroll_inputs",
    "send",
    "text_inputs",
]

"""Windows desktops: the local desktop as a device, keys, Unicode text and mouse through
SendInput (ctypes only), mss capture, page loads through the platform-neutral controller."""

from labd_windows.desktop import WindowsDesktop
from labd_windows.driver import WindowsDriver, WindowsOptions
from labd_windows.input import WindowsInput
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
from labd_windows.win32 import Win32, Win32Api

__all__ = [
    "INPUT",
    "KEYBDINPUT",
    "MOUSEINPUT",
    "Win32",
    "Win32Api",
    "WindowsDesktop",
    "WindowsDriver",
    "WindowsInput",
    "WindowsOptions",
    "click_inputs",
    "combo_inputs",
    "scroll_inputs",
    "send",
    "text_inputs",
]

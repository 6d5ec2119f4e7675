"""Android phones and emulators over adb: discovery, health, stabilisation, low-latency input,
the app cold-launch scenario."""

from labd_android.driver import AndroidDriver, AndroidOptions
from labd_android.input import AndroidInput, Touch
from labd_android.shell import PersistentShell, command_line

__all__ = [
    "AndroidDriver",
    "AndroidInput",
    "AndroidOptions",
    "PersistentShell",
    "Touch",
    "command_line",
]

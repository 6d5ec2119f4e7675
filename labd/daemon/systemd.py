"""The systemd notify protocol (sd_notify), spoken directly over NOTIFY_SOCKET.

Outside systemd (no NOTIFY_SOCKET) every call is a no-op, so the daemon needs no special case.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

import structlog

log = structlog.get_logger("labd.systemd")

# The shortest interval between two watchdog pings, however small WATCHDOG_USEC is.
WATCHDOG_MIN_INTERVAL_S = 0.1


class SystemdNotifier:
    """Sends READY/STATUS/STOPPING/WATCHDOG datagrams to the service manager."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        address = environ.get("NOTIFY_SOCKET", "")
        # A leading '@' names a socket in the abstract namespace.
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._socket: socket.socket | None = None
        self.watchdog_interval = _watchdog_interval(environ)

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def notify(self, *lines: str) -> None:
        """Send `lines` (e.g. "READY=1", "STATUS=...") as one datagram; never raises."""
        if not self._address:
            return
        try:
            if self._socket is None:
                self._socket = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                )
            self._socket.sendto("\n".join(lines).encode(), self._address)
        except OSError as e:
            log.warning("systemd notification failed", error=str(e), message=lines)

    def ready(self, status: str) -> None:
        self.notify("READY=1", f"STATUS={status}", f"MAINPID={os.getpid()}")

    def status(self, status: str) -> None:
        self.notify(f"STATUS={status}")

    def stopping(self, status: str) -> None:
        self.notify("STOPPING=1", f"STATUS={status}")

    def watchdog(self) -> None:
        self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def _watchdog_interval(environ: Mapping[str, str]) -> float | None:
    """Half of WATCHDOG_USEC in seconds (at least WATCHDOG_MIN_INTERVAL_S), when the watchdog
    is meant for this process; a value that is not a positive integer is ignored."""
    usec = environ.get("WATCHDOG_USEC")
    pid = environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return None
    try:
        microseconds = int(usec)
    except ValueError:
        microseconds = 0
    if microseconds <= 0:
        log.warning("ignoring malformed WATCHDOG_USEC", value=usec)
        return None
    return max(microseconds / 2 / 1_000_000, WATCHDOG_MIN_INTERVAL_S)

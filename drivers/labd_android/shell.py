"""Running commands on a device. `adb shell` takes one string that the device's sh parses,
so every argument is quoted here (shlex.join); adbutils' own list form uses Windows quoting
(subprocess.list2cmdline), which leaves `$()` and backticks live inside double quotes, so it
is never used.

PersistentShell keeps one `sh` on the device (adb's exec service, no terminal) and writes
commands to it, each followed by a sentinel echo: no new adb connection, transport or shell
per command.
"""

from __future__ import annotations

import itertools
import shlex
import socket
import threading
import time
from collections.abc import Sequence

import adbutils

from labd.sdk import InfrastructureError


def command_line(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def run(device: adbutils.AdbDevice, argv: Sequence[str], timeout: float = 60.0) -> str:
    """One command over a fresh adb shell connection; its output."""
    try:
        output = device.shell(command_line(argv), timeout=timeout)
    except (adbutils.AdbError, OSError, EOFError) as e:
        raise InfrastructureError(
            f"device {device.serial}: {' '.join(argv[:2])}: {e or type(e).__name__}"
        ) from e
    return str(output)


class PersistentShell:
    def __init__(self, device: adbutils.AdbDevice) -> None:
        self.device = device
        self.lock = threading.Lock()
        self.counter = itertools.count()
        self.connection: adbutils.AdbConnection | None = None
        self.pending = b""

    def _open(self) -> adbutils.AdbConnection:
        try:
            connection = self.device.open_transport()
            connection.send_command("exec:sh")
            connection.check_okay()
        except (adbutils.AdbError, OSError, EOFError) as e:
            raise InfrastructureError(
                f"device {self.device.serial}: cannot open a shell ({e})"
            ) from e
        connection.conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def run(self, argv: Sequence[str], timeout: float = 30.0) -> tuple[str, int]:
        """(output, exit status) of one command; the shell is reopened when it died (an adb
        server restart, a replugged device)."""
        with self.lock:
            for attempt in (1, 2):
                if self.connection is None:
                    self.connection = self._open()
                try:
                    return self._exchange(self.connection, command_line(argv), timeout)
                except (OSError, EOFError, TimeoutError) as e:
                    self.close()
                    if attempt == 2:
                        raise InfrastructureError(
                            f"device {self.device.serial}: shell lost ({e or type(e).__name__})"
                        ) from e
            raise AssertionError("unreachable")

    def _exchange(
        self, connection: adbutils.AdbConnection, line: str, timeout: float
    ) -> tuple[str, int]:
        sentinel = f"__labd_{next(self.counter)}_"
        connection.conn.sendall(f"{line}; echo {sentinel}$?\n".encode())
        connection.conn.settimeout(timeout)
        marker = sentinel.encode()
        deadline = time.monotonic() + timeout
        while marker not in self.pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer in {timeout:.0f} s")
            chunk = connection.conn.recv(65536)
            if not chunk:
                raise EOFError("the device closed the shell")
            self.pending += chunk
        output, _, rest = self.pending.partition(marker)
        status, _, self.pending = rest.partition(b"\n")
        return output.decode("utf-8", "replace"), int(status or b"0")

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.pending = b""

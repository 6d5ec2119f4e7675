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
import re
import shlex
import socket
import threading
import time
from collections.abc import Sequence

import adbutils

from labd.sdk import InfrastructureError
from labd_android.adb import ADB_ERRORS, failure
from labd_android.names import shown

STATUS = re.compile(rb"\s*(\d{1,3})\s*")  # what `echo $?` prints
MAX_ANSWER = 16 * 2**20  # one command's output held; the driver's commands print kilobytes


def command_line(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def run(device: adbutils.AdbDevice, argv: Sequence[str], timeout: float | None = None) -> str:
    """One command over a fresh adb shell connection; its output. Without `timeout`, the
    device answers within ADB_TIMEOUT_S, as for any request of the driver's own."""
    try:
        output = device.shell(command_line(argv), timeout=timeout)
    except ADB_ERRORS as e:
        raise failure(f"device {device.serial}: {' '.join(argv[:2])}", e, timeout) from e
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
        except ADB_ERRORS as e:
            raise failure(f"device {self.device.serial}: cannot open a shell", e) from e
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
        # The answer is complete once the sentinel's line is: its status may come in a
        # chunk of its own. Each search starts where the last left off (linear time).
        pending, searched = bytearray(self.pending), 0
        while (at := pending.find(marker, searched)) < 0 or pending.find(b"\n", at) < 0:
            searched = at if at >= 0 else max(0, len(pending) - len(marker) + 1)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer in {timeout:.0f} s")
            if len(pending) > MAX_ANSWER:
                self.close()  # the rest of its answer would be read as the next one's
                raise InfrastructureError(
                    f"device {self.device.serial}: {shown(line)}: answered more than "
                    f"{MAX_ANSWER // 2**20} MiB"
                )
            chunk = connection.conn.recv(65536)
            if not chunk:
                raise EOFError("the device closed the shell")
            pending += chunk
        output, _, rest = bytes(pending).partition(marker)
        status, _, self.pending = rest.partition(b"\n")
        if (number := STATUS.fullmatch(status)) is None:
            self.close()  # what else it sent is no answer to the next command either
            raise InfrastructureError(
                f"device {self.device.serial}: {shown(line)}: the shell answered "
                f"{shown(sentinel + status.decode('utf-8', 'replace'))}, not an exit status"
            )
        return output.decode("utf-8", "replace"), int(number.group(1))

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None
        self.pending = b""

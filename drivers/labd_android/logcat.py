"""`adb logcat` as a marker stream: Raptor's performance marks and Android's own launch lines,
read from the moment the stream opens (`-T 1`: no backlog from earlier runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import adbutils

from labd.sdk import LineStream

COMMAND = "logcat -v threadtime -T 1"


class Logcat(LineStream):
    ended_reason = "ended (device gone?)"

    def __init__(self, device: adbutils.AdbDevice) -> None:
        super().__init__(f"logcat of {device.serial}")
        self.device = device
        self.stream: adbutils.AdbConnection | None = None

    def read_lines(self) -> Iterator[str]:
        try:
            self.stream = self.device.shell(COMMAND, stream=True)
        except (adbutils.AdbError, OSError) as e:
            raise OSError(f"cannot start it ({e})") from e
        pending = b""
        with self.stream:
            while True:
                try:
                    chunk = self.stream.conn.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    yield raw.decode("utf-8", "replace")

    def interrupt(self) -> None:
        if self.stream is not None:
            with contextlib.suppress(OSError):
                self.stream.conn.shutdown(2)  # a blocked recv returns

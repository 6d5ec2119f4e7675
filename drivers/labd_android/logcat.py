"""`adb logcat` as a marker stream: Raptor's performance marks and Android's own launch lines,
read from the moment the stream opens (`-T 1`: no backlog from earlier runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import adbutils
import structlog

from labd.sdk import LineStream
from labd_android.adb import ADB_ERRORS

COMMAND = "logcat -v threadtime -T 1"
# Android's logger keeps at most about 4 KiB of one entry: a longer line is no log line (a
# device or an app flooding), so it is dropped, and never held in memory whole.
MAX_LINE = 65536

log = structlog.get_logger("labd.android")


class Lines:
    """Bytes as they come, cut into lines in linear time; a line longer than `limit` is
    dropped and counted (`too_long`), holding no more than `limit` bytes of it."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self.pending = bytearray()
        self.skipping = False  # inside a line already found too long
        self.too_long = 0

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not self.skipping and self._fits(end - start):
                yield bytes(self.pending) + chunk[start:end]
            self.pending.clear()
            self.skipping = False
            start = end + 1
        if not self.skipping and self._fits(len(chunk) - start):
            self.pending += chunk[start:]
        else:
            self.pending.clear()
            self.skipping = True

    def _fits(self, more: int) -> bool:
        if len(self.pending) + more <= self.limit:
            return True
        self.too_long += 1
        return False


class Logcat(LineStream):
    ended_reason = "ended (device gone?)"

    def __init__(self, device: adbutils.AdbDevice) -> None:
        super().__init__(f"logcat of {device.serial}")
        self.device = device
        self.stream: adbutils.AdbConnection | None = None
        self.lines = Lines()

    def read_lines(self) -> Iterator[str]:
        try:
            self.stream = self.device.shell(COMMAND, stream=True)
        except ADB_ERRORS as e:
            raise OSError(f"cannot start it ({e})") from e
        # A quiet log is no failure: the stream ends with the device or with `interrupt`.
        self.stream.conn.settimeout(None)
        with self.stream:
            while True:
                try:
                    chunk = self.stream.conn.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                warned = self.lines.too_long > 0
                for raw in self.lines.feed(chunk):
                    yield raw.decode("utf-8", "replace")
                if self.lines.too_long and not warned:  # once: the count says how many
                    log.warning("a log line too long: dropped", stream=self.name, limit=MAX_LINE)

    def interrupt(self) -> None:
        # The stream may have ended, and closed, already (a device unplugged mid-job).
        with contextlib.suppress(OSError, adbutils.AdbError):
            if self.stream is not None:
                self.stream.conn.shutdown(2)  # a blocked recv returns

"""A phone's screen for scenarios: its size, screenshots (`screencap`), the browser showing a
URL, ports between host and phone (`adb reverse`, `adb forward`), and `screenrecord`'s H.264
stream as a capture source.

Every shell command goes through the persistent shell, each argument quoted (a URL or a
package name from a job never meets the phone's sh unquoted). The methods block: scenarios
call them on a thread.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import socket
import subprocess
import threading
from dataclasses import dataclass

import adbutils
import cv2
import numpy as np

from labd.capture import CaptureError, H264Decoder
from labd.sdk import FrameSource, Image, InfrastructureError, TestFailure
from labd_android.adb import ADB_ERRORS, Client, failure
from labd_android.shell import PersistentShell

VIEW = "android.intent.action.VIEW"
SIZE = re.compile(r"(Physical|Override) size:\s*(\d+)x(\d+)")
# screenrecord refuses longer recordings (Android's own limit).
MAX_RECORD_S = 180


@dataclass(frozen=True)
class ScreenRecord:
    """`adb exec-out screenrecord --output-format=h264 -` as a labd.sdk.CaptureSource: plain
    values, pickled into the capture process, which opens its own adb connection."""

    serial: str
    adb_host: str
    adb_port: int
    size: tuple[int, int]
    fps: float = 60.0
    time_limit_s: int = MAX_RECORD_S

    def open(self) -> FrameSource:
        return ScreenRecordStream(self)


class ScreenRecordStream(H264Decoder):
    """The stream read from adb's socket on a thread and fed to ffmpeg."""

    def __init__(self, spec: ScreenRecord) -> None:
        width, height = spec.size
        argv = ["screenrecord", "--output-format=h264", f"--size={width}x{height}",
                f"--time-limit={spec.time_limit_s}", "-"]  # fmt: skip
        device = Client(host=spec.adb_host, port=spec.adb_port).device(spec.serial)
        try:
            self.connection = device.open_transport()
            self.connection.send_command("exec:" + shlex.join(argv))
            self.connection.check_okay()
        except ADB_ERRORS as e:
            raise CaptureError(str(failure(f"device {spec.serial}: screenrecord", e))) from e
        # A still screen sends nothing for as long as it stays still: the stream ends with the
        # recording's time limit, the device, or `close`.
        self.connection.conn.settimeout(None)
        super().__init__(subprocess.PIPE, spec.size)
        self.feeder = threading.Thread(target=self._feed, name="screenrecord", daemon=True)
        self.feeder.start()

    def _feed(self) -> None:
        stdin = self.decoder.stdin
        assert stdin is not None
        try:
            while chunk := self.connection.conn.recv(65536):
                stdin.write(chunk)
                stdin.flush()
        except (OSError, ValueError):  # the decoder or the device went away: the end
            pass
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.conn.shutdown(socket.SHUT_RDWR)
        self.connection.close()
        super().close()
        self.feeder.join(5)


class AndroidScreen:
    def __init__(self, device: adbutils.AdbDevice, shell: PersistentShell, adb: tuple[str, int]):
        self.device = device
        self.shell = shell
        self.adb = adb  # the adb server's host and port, for the capture process

    def run(self, *argv: str) -> str:
        """One command through the persistent shell; TestFailure when the phone refuses it
        (`am start` exits 0 and says "Error: ..." on a line of its own)."""
        output, status = self.shell.run(list(argv))
        if status != 0 or any(line.startswith("Error") for line in output.splitlines()):
            raise TestFailure(f"{' '.join(argv[:3])}: exit status {status}: {output.strip()[:200]}")
        return output

    def size(self) -> tuple[int, int]:
        """The display's size in pixels (an override, as `wm size 720x1280` sets, first)."""
        found = {kind: (int(w), int(h)) for kind, w, h in SIZE.findall(self.run("wm", "size"))}
        size = found.get("Override") or found.get("Physical")
        if size is None:
            raise InfrastructureError(f"device {self.device.serial}: `wm size` gave no size")
        return size

    def screenshot(self) -> Image:
        """The screen now (screencap), every 4th pixel: enough to see a change."""
        try:
            connection = self.device.open_transport()
            connection.send_command("exec:screencap -p")
            connection.check_okay()
            png = connection.read_until_close(encoding=None)
        except ADB_ERRORS as e:
            raise failure(f"device {self.device.serial}: screencap", e) from e
        image = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise InfrastructureError(f"device {self.device.serial}: screencap gave no image")
        return np.ascontiguousarray(image[::4, ::4])

    def capture(self, fps: float, size: tuple[int, int]) -> ScreenRecord:
        return ScreenRecord(self.device.serial, self.adb[0], self.adb[1], size, fps)

    def view(self, url: str, package: str) -> None:
        """The browser `package` shows `url` (the VIEW intent, as a link tapped elsewhere)."""
        self.run("am", "start", "-a", VIEW, "-d", url, "-p", package)

    def start_activity(self, component: str) -> None:
        self.run("am", "start", "-W", "-n", component)

    def force_stop(self, package: str) -> None:
        self.run("am", "force-stop", package)

    def set_proxy(self, address: str) -> None:
        """The phone's global HTTP proxy (Chrome and WebView follow it); "" removes it."""
        self.run("settings", "put", "global", "http_proxy", address or ":0")

    def reverse(self, port: int) -> None:
        """The phone's 127.0.0.1:`port` reaches the host's."""
        try:
            self.device.reverse(f"tcp:{port}", f"tcp:{port}")
        except ADB_ERRORS as e:
            raise failure(f"device {self.device.serial}: adb reverse", e) from e

    def forward(self, remote: str) -> int:
        """A host port reaching the phone's `remote` (e.g. localabstract:chrome_devtools_remote)."""
        try:
            return int(self.device.forward_port(remote))
        except ADB_ERRORS as e:
            raise failure(f"device {self.device.serial}: adb forward", e) from e

    def remove_forward(self, port: int) -> None:
        with contextlib.suppress(*ADB_ERRORS):
            self.device.forward_remove(f"tcp:{port}", raise_non_found=False)

    def close(self) -> None:
        self.shell.close()

"""Live frame sources, recorded in a process of their own into a spool file.

A source (a labd.sdk.FrameSource, opened from a labd.sdk.CaptureSource: SourceSpec here, or a
driver's own) yields (time in ms, BGR frame). The recorder process grabs on one thread and
encodes on another, with a bounded queue between them: when encoding falls behind, frames are
dropped and counted, never silently, and the daemon's loop is never stalled by a capture. The
spool is Motion-JPEG (11 ms to encode a busy 1080p frame here, where lossless FFV1 takes 60),
with the capture times beside it, one per line, so the analysis uses real times, not the
nominal rate.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import asdict, dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, Literal

import cv2
import numpy as np

from labd.capture.errors import CaptureError
from labd.sdk import CaptureSource, FrameSource, Image


class Paced(FrameSource):
    """Sources polled at a fixed rate (screen grabs): a missed tick is a dropped frame."""

    def __init__(self, fps: float) -> None:
        self.interval = 1.0 / fps
        self.next_tick: float | None = None  # set by the first read, not by opening

    def wait_tick(self) -> None:
        now = time.monotonic()
        if self.next_tick is None:
            self.next_tick = now
        if now < self.next_tick:
            time.sleep(self.next_tick - now)
        else:
            missed = int((now - self.next_tick) / self.interval)
            self.dropped += missed
            self.next_tick += missed * self.interval
        self.next_tick += self.interval


class ScreenGrab(Paced):
    """A screen or a region of it, through mss: an X11 display (XCB shared memory when
    available), or with no display named this machine's own screen (Windows, macOS)."""

    def __init__(
        self, display: str | None, region: tuple[int, int, int, int] | None, fps: float
    ) -> None:
        super().__init__(fps)
        import mss

        what = f"X11 display {display!r}" if display is not None else "the screen"
        try:
            self.screen = mss.MSS(display=display) if display is not None else mss.MSS()
        except Exception as e:  # mss raises its own ScreenShotError and OS errors
            raise CaptureError(f"{what}: cannot open it ({e})") from e
        monitor = self.screen.monitors[0]
        if region is None:
            region = (monitor["left"], monitor["top"], monitor["width"], monitor["height"])
        x, y, w, h = region
        self.region = {"left": x, "top": y, "width": w, "height": h}

    def read(self) -> tuple[float, Image] | None:
        self.wait_tick()
        shot = self.screen.grab(self.region)
        t = time.monotonic() * 1000.0
        return t, np.asarray(cv2.cvtColor(np.asarray(shot), cv2.COLOR_BGRA2BGR), dtype=np.uint8)

    def close(self) -> None:
        self.screen.close()


class OpenCvDevice(FrameSource):
    """An HDMI/DVI capture card or camera through V4L2 (/dev/videoN), or any URL or file
    OpenCV opens (a file stands in for a card in tests)."""

    def __init__(self, device: str, fps: float) -> None:
        backend = cv2.CAP_V4L2 if device.startswith("/dev/video") else cv2.CAP_ANY
        self.capture = cv2.VideoCapture(device, backend)
        if not self.capture.isOpened():
            raise CaptureError(f"capture device {device!r}: cannot open it")
        self.capture.set(cv2.CAP_PROP_FPS, fps)

    def read(self) -> tuple[float, Image] | None:
        ok, frame = self.capture.read()
        if not ok:
            return None
        return time.monotonic() * 1000.0, np.asarray(frame, dtype=np.uint8)

    def close(self) -> None:
        self.capture.release()


class H264Decoder(FrameSource):
    """An H.264 elementary stream decoded by ffmpeg as it streams; `stdin` is what feeds it
    (a pipe from a producer process, or subprocess.PIPE that a subclass writes into).

    The stream has no timestamps (screenrecord writes none), so a frame's time is when it
    left the decoder: the decoder is told not to buffer (low_delay, a tiny probe) so that
    time stays close to when the device showed it; with the default probe it waits for
    megabytes of stream before the first frame."""

    def __init__(self, stdin: Any, size: tuple[int, int]) -> None:
        ffmpeg = shutil.which("ffmpeg")
        if ffmpeg is None:
            raise CaptureError("an H.264 screen stream needs ffmpeg (Debian package ffmpeg)")
        self.size = size
        # (-fflags nobuffer loses every frame before the second keyframe: not used.)
        decode = [ffmpeg, "-loglevel", "error", "-flags", "low_delay", "-probesize", "32",
                  "-analyzeduration", "0", "-f", "h264", "-i", "pipe:0",
                  "-f", "rawvideo", "-pix_fmt", "bgr24", "pipe:1"]  # fmt: skip
        self.decoder = subprocess.Popen(decode, stdin=stdin, stdout=subprocess.PIPE)

    def read(self) -> tuple[float, Image] | None:
        w, h = self.size
        assert self.decoder.stdout is not None
        data = self.decoder.stdout.read(w * h * 3)
        if len(data) < w * h * 3:
            return None
        return time.monotonic() * 1000.0, np.frombuffer(data, np.uint8).reshape(h, w, 3)

    def close(self) -> None:
        self.decoder.kill()
        self.decoder.wait()


class H264Stream(H264Decoder):
    """An H.264 stream from a command: Android's
    `adb exec-out screenrecord --output-format=h264 -`."""

    def __init__(self, command: list[str], size: tuple[int, int]) -> None:
        if shutil.which("ffmpeg") is None:
            raise CaptureError("an H.264 screen stream needs ffmpeg (Debian package ffmpeg)")
        self.producer = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        super().__init__(self.producer.stdout, size)
        assert self.producer.stdout is not None
        self.producer.stdout.close()  # the decoder owns it now

    def close(self) -> None:
        self.producer.kill()
        self.producer.wait()
        super().close()


def screenrecord_command(serial: str, size: tuple[int, int], adb: str = "adb") -> list[str]:
    """Each argument is its own word: the serial never meets a shell."""
    return [
        adb, "-s", serial, "exec-out", "screenrecord", "--output-format=h264",
        f"--size={size[0]}x{size[1]}", "-",
    ]  # fmt: skip


@dataclass(frozen=True)
class SourceSpec:
    """What to open, in a form a child process can receive (a labd.sdk.CaptureSource)."""

    kind: Literal["x11", "screen", "device", "h264"]
    target: str = ""  # DISPLAY, device path, or the serial for h264 via adb; screen: unused
    region: tuple[int, int, int, int] | None = None
    size: tuple[int, int] = (1080, 1920)
    command: tuple[str, ...] = ()  # h264: the stream's producer
    fps: float = 60.0

    def open(self) -> FrameSource:
        if self.kind in ("x11", "screen"):
            return ScreenGrab(self.target if self.kind == "x11" else None, self.region, self.fps)
        if self.kind == "device":
            return OpenCvDevice(self.target, self.fps)
        return H264Stream(
            list(self.command) or screenrecord_command(self.target, self.size), self.size
        )


@dataclass(frozen=True)
class Spool:
    """A finished recording: the video, its frame times and what was lost."""

    path: Path
    timestamps: list[float]
    frames: int
    dropped: int
    error: str = ""

    @classmethod
    def load(cls, path: Path) -> Spool:
        info = json.loads(path.with_suffix(".json").read_text())
        times = [float(line) for line in path.with_suffix(".times").read_text().split()]
        return cls(path, times, info["frames"], info["dropped"], info.get("error", ""))


def _record(
    spec: CaptureSource,
    path: Path,
    ready: Event,
    stop: Event,
    seconds: float,
    buffer: int,
    cpus: set[int] | None,
    written: Synchronized[int] | None = None,
) -> None:
    """The recorder process: grab thread -> bounded queue -> encoder (this thread)."""
    if cpus:  # before any thread starts: threads inherit it
        os.sched_setaffinity(0, cpus)
    frames: queue.Queue[tuple[float, Image] | None] = queue.Queue(maxsize=buffer)
    counts = {"frames": 0, "dropped": 0}
    error = ""
    try:
        source = spec.open()
    except CaptureError as e:
        _write_info(path, counts, str(e))
        return
    finally:
        ready.set()
    deadline = time.monotonic() + seconds

    def grab() -> None:
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                item = source.read()
                if item is None:
                    break
                try:
                    frames.put_nowait(item)
                except queue.Full:
                    counts["dropped"] += 1
        finally:
            frames.put(None)

    grabber = threading.Thread(target=grab, daemon=True)
    grabber.start()
    writer: cv2.VideoWriter | None = None
    with path.with_suffix(".times").open("w") as times:
        while (item := frames.get()) is not None:
            t, frame = item
            if writer is None:
                size = (frame.shape[1], frame.shape[0])
                writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), spec.fps, size)
                writer.set(cv2.VIDEOWRITER_PROP_QUALITY, 95)
            writer.write(frame)
            times.write(f"{t:.3f}\n")
            counts["frames"] += 1
            if written is not None:
                written.value = counts["frames"]
    grabber.join()
    if writer is not None:
        writer.release()
    counts["dropped"] += source.dropped
    source.close()
    if counts["frames"] == 0:
        error = "the source gave no frame"
    _write_info(path, counts, error)


def _write_info(path: Path, counts: dict[str, int], error: str) -> None:
    path.with_suffix(".json").write_text(json.dumps({**counts, "error": error}))
    path.with_suffix(".times").touch()


class Recorder:
    """Records a live source in a child process until stopped (or `seconds` pass)."""

    def __init__(
        self,
        spec: CaptureSource,
        path: Path,
        seconds: float = 600.0,
        buffer: int = 120,
        cpus: set[int] | None = None,  # where it may run (off a measured program's CPUs)
    ) -> None:
        context = multiprocessing.get_context("spawn")  # no inherited threads or event loop
        self.path = path
        self.ready = context.Event()
        self.written: Synchronized[int] = context.Value("i", 0)  # frames spooled so far
        self.stop_event = context.Event()
        self.process = context.Process(
            target=_record,
            args=(spec, path, self.ready, self.stop_event, seconds, buffer, cpus, self.written),
            name="labd-capture",
            daemon=True,
        )

    def start(self, timeout: float = 30.0) -> None:
        """Start, and return once the source is open (its errors come from `stop`)."""
        self.process.start()
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if not self.process.is_alive() or time.monotonic() > deadline:
                break

    def wait_frames(self, count: int, timeout: float) -> None:
        """Return once `count` frames are spooled: a stream that takes a while to start
        (screenrecord's encoder) is flowing before anything worth filming happens."""
        deadline = time.monotonic() + timeout
        while self.written.value < count:
            if not self.process.is_alive() or time.monotonic() > deadline:
                raise CaptureError(
                    f"{self.path}: {self.written.value} frames after {timeout:g} s "
                    f"(waited for {count}): the source is not streaming"
                )
            time.sleep(0.02)

    def stop_when_done(self, timeout: float) -> Spool:
        """Let a finite source (a file, a stream) run to its end, then collect the spool."""
        self.process.join(timeout)
        return self.stop()

    def stop(self, timeout: float = 30.0) -> Spool:
        self.stop_event.set()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
            raise CaptureError(f"{self.path}: the capture process did not stop in {timeout:.0f} s")
        if not self.path.with_suffix(".json").exists():
            raise CaptureError(
                f"{self.path}: the capture process died (exit code {self.process.exitcode})"
            )
        spool = Spool.load(self.path)
        if spool.error:
            raise CaptureError(f"{self.path}: {spool.error}")
        return spool


def spool_summary(spool: Spool) -> dict[str, object]:
    summary = asdict(spool)
    summary["path"] = str(spool.path)
    del summary["timestamps"]
    return summary

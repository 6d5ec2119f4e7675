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

import contextlib
import json
import multiprocessing
import os
import queue
import shutil
import signal
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

        what = self.what = f"X11 display {display!r}" if display is not None else "the screen"
        try:
            self.screen = mss.MSS(display=display) if display is not None else mss.MSS()
        except Exception as e:  # mss raises its own ScreenShotError and OS errors
            raise CaptureError(f"{what}: cannot open it ({e})") from e
        monitor = self.screen.monitors[0]
        left, top, width, height = (monitor[k] for k in ("left", "top", "width", "height"))
        if region is None:
            region = (left, top, width, height)
        x, y, w, h = region
        inside = x >= left and y >= top and x + w <= left + width and y + h <= top + height
        if w <= 0 or h <= 0 or not inside:
            self.screen.close()
            raise CaptureError(
                f"{what}: the region {w}x{h}+{x}+{y} is not within the screen, "
                f"{width}x{height}+{left}+{top}"
            )
        self.region = {"left": x, "top": y, "width": w, "height": h}

    def read(self) -> tuple[float, Image] | None:
        self.wait_tick()
        try:
            shot = self.screen.grab(self.region)
        except Exception as e:  # mss's own errors: the display went away (killed, restarted)
            detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise CaptureError(
                f"{self.what}: the screen could not be read: is the display still there? ({detail})"
            ) from e
        t = time.monotonic() * 1000.0
        return t, np.asarray(cv2.cvtColor(np.asarray(shot), cv2.COLOR_BGRA2BGR), dtype=np.uint8)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a display that went away: nothing left to close
            self.screen.close()


class OpenCvDevice(FrameSource):
    """An HDMI/DVI capture card or camera through V4L2 (/dev/videoN), or any URL or file
    OpenCV opens. A file stands in for a card: it is played at its own pace, each frame
    handed over when its own timestamp comes due and stamped with it, as a card would deliver
    it (read as fast as it decodes, its times would be decoding times, not the video's)."""

    def __init__(self, device: str, fps: float) -> None:
        backend = cv2.CAP_V4L2 if device.startswith("/dev/video") else cv2.CAP_ANY
        self.capture = cv2.VideoCapture(device, backend)
        if not self.capture.isOpened():
            raise CaptureError(f"capture device {device!r}: cannot open it")
        self.capture.set(cv2.CAP_PROP_FPS, fps)
        self.file = Path(device).is_file()
        nominal = float(self.capture.get(cv2.CAP_PROP_FPS) or 0.0) if self.file else 0.0
        self.step_ms = 1000.0 / (nominal if nominal > 0 else fps)
        self.started: float | None = None  # monotonic ms when the file's time 0 was shown
        self.previous = -1.0

    def read(self) -> tuple[float, Image] | None:
        ok, frame = self.capture.read()
        if not ok:
            return None
        image = np.asarray(frame, dtype=np.uint8)
        if not self.file:
            return time.monotonic() * 1000.0, image
        at = float(self.capture.get(cv2.CAP_PROP_POS_MSEC))
        if at <= self.previous:  # a container without usable timestamps
            at = self.previous + self.step_ms
        self.previous = at
        if self.started is None:
            self.started = time.monotonic() * 1000.0 - at
        due = self.started + at
        wait = due - time.monotonic() * 1000.0
        if wait > 0:
            time.sleep(wait / 1000.0)
        return due, image

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


MAX_FPS = 1000.0  # no capture chain delivers more; a higher rate is a typo


@dataclass(frozen=True)
class SourceSpec:
    """What to open, in a form a child process can receive (a labd.sdk.CaptureSource)."""

    kind: Literal["x11", "screen", "device", "h264"]
    target: str = ""  # DISPLAY, device path, or the serial for h264 via adb; screen: unused
    region: tuple[int, int, int, int] | None = None
    size: tuple[int, int] = (1080, 1920)
    command: tuple[str, ...] = ()  # h264: the stream's producer
    fps: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.fps <= MAX_FPS:  # also refuses nan
            raise CaptureError(f"fps {self.fps}: must be above 0 and at most {MAX_FPS}")
        if min(self.size) <= 0:
            raise CaptureError(f"size {self.size[0]}x{self.size[1]}: must be positive")

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
    ended_early: str = ""  # the source ended before the stop or the time asked for: how

    def failure(self, error: Exception) -> str:
        """What an analysis of this spool said, naming the screen capture rather than the
        spool's file, which is deleted after it (a job's error named a file no one can open)."""
        return str(error).replace(f"{self.path}: ", "the screen capture: ", 1)

    @classmethod
    def load(cls, path: Path) -> Spool:
        info = json.loads(path.with_suffix(".json").read_text())
        times = [float(line) for line in path.with_suffix(".times").read_text().split()]
        return cls(
            path,
            times,
            info["frames"],
            info["dropped"],
            info.get("error", ""),
            info.get("ended_early", ""),
        )


STALL_S = 2.0  # after a stop, how long a blocked read may go on before the source is closed


def _record(
    spec: CaptureSource,
    path: Path,
    ready: Event,
    stop: Event,
    seconds: float,
    buffer: int,
    cpus: set[int] | None,
    written: Synchronized[int] | None = None,
    parent: int | None = None,
) -> None:
    """The recorder process: grab thread -> bounded queue -> encoder (this thread). It leads
    a process group of its own, so the source's processes (a stream's producer, its decoder)
    can be ended with it. It stops when `parent` (labd) is gone: a killed labd's recording
    would go on loading the host while the restarted labd runs the job again."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    if cpus:  # before any thread starts: threads inherit it
        os.sched_setaffinity(0, cpus)
    frames: queue.Queue[tuple[float, Image] | None] = queue.Queue(maxsize=buffer)
    counts = {"frames": 0, "dropped": 0}
    errors: list[str] = []
    try:
        source = spec.open()
    except CaptureError as e:
        _write_info(path, counts, str(e))
        return
    finally:
        ready.set()
    began = time.monotonic()
    deadline = began + seconds
    ended_early: list[str] = []  # the source ran out before it was stopped
    halt = threading.Event()  # the encoder gave up: grab no more
    closed = threading.Event()  # the source was closed under a blocked read

    def grab() -> None:
        try:
            while not (stop.is_set() or halt.is_set()) and time.monotonic() < deadline:
                if parent is not None and os.getppid() != parent:
                    errors.append("labd, which started the recording, is gone")
                    break
                item = source.read()
                if item is None:
                    if not (stop.is_set() or halt.is_set() or closed.is_set()):
                        ended_early.append(
                            f"the source ended {time.monotonic() - began:.1f} s into the "
                            f"{seconds:g} s asked for"
                        )
                    break
                try:
                    frames.put_nowait(item)
                except queue.Full:
                    counts["dropped"] += 1
        except Exception as e:  # a source's own failure: reported, not printed and lost
            if not closed.is_set():
                errors.append(f"the source failed: {e}")
        finally:
            frames.put(None)

    grabber = threading.Thread(target=grab, daemon=True)
    grabber.start()
    writer: cv2.VideoWriter | None = None
    size: tuple[int, int] | None = None
    ended: float | None = None  # monotonic time the stop or the deadline came
    with path.with_suffix(".times").open("w") as times:
        while True:
            try:
                item = frames.get(timeout=0.1)
            except queue.Empty:
                if ended is None and (stop.is_set() or time.monotonic() >= deadline):
                    ended = time.monotonic()
                if ended is not None and time.monotonic() - ended > STALL_S:
                    _close_stalled(source, closed, errors)
                continue
            if item is None:
                break
            t, frame = item
            if size is None:
                size = (frame.shape[1], frame.shape[0])
                writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), spec.fps, size)
                writer.set(cv2.VIDEOWRITER_PROP_QUALITY, 95)
            if (frame.shape[1], frame.shape[0]) != size:
                # A video holds one size: the frame would not be written. End here, saying so.
                errors.append(
                    f"the source changed resolution at frame {counts['frames']}: "
                    f"{frame.shape[1]}x{frame.shape[0]}, the recording's frames are "
                    f"{size[0]}x{size[1]}; recording stopped there"
                )
                halt.set()
                _drain(frames)
                break
            assert writer is not None
            writer.write(frame)
            times.write(f"{t:.3f}\n")
            counts["frames"] += 1
            if written is not None:
                written.value = counts["frames"]
    grabber.join(STALL_S)
    if grabber.is_alive():  # still blocked in a read
        _close_stalled(source, closed, errors)
        grabber.join()
    if writer is not None:
        writer.release()
    counts["dropped"] += source.dropped
    if not closed.is_set():
        source.close()
    error = "; ".join(errors)
    if counts["frames"] == 0:
        error = "; ".join(["the source gave no frame", *errors])
    _write_info(path, counts, error, "".join(ended_early))


def _close_stalled(source: FrameSource, closed: threading.Event, errors: list[str]) -> None:
    """Close a source whose read is blocked (a stream that stopped sending), once."""
    if not closed.is_set():
        closed.set()
        errors.append(f"the source stalled: no frame for {STALL_S:g} s after the end; closed it")
        source.close()


def _drain(frames: queue.Queue[tuple[float, Image] | None]) -> None:
    """Empty the queue until the grab thread's end mark, so that it can put it."""
    while frames.get() is not None:
        pass


def _write_info(path: Path, counts: dict[str, int], error: str, ended_early: str = "") -> None:
    info = {**counts, "error": error, "ended_early": ended_early}
    path.with_suffix(".json").write_text(json.dumps(info))
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
        wanted = (spec, path, self.ready, self.stop_event, seconds, buffer, cpus, self.written)
        self.process = context.Process(
            target=_record,
            args=(*wanted, os.getpid()),
            name="labd-capture",
            daemon=True,
        )

    def start(self, timeout: float = 30.0) -> None:
        """Start, and return once the source is open (its errors come from `stop`). An
        earlier attempt's files are unlinked first, not overwritten: the recording of a killed
        labd may still be writing them (it wrote into the retry's times, which read back
        with NUL bytes)."""
        for old in (self.path, self.path.with_suffix(".times"), self.path.with_suffix(".json")):
            old.unlink(missing_ok=True)
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
            self._kill_group()
            raise CaptureError(f"{self.path}: the capture process did not stop in {timeout:.0f} s")
        if not self.path.with_suffix(".json").exists():
            raise CaptureError(
                f"{self.path}: the capture process died (exit code {self.process.exitcode})"
            )
        spool = Spool.load(self.path)
        if spool.error:
            raise CaptureError(f"{self.path}: {spool.error}")
        return spool

    def _kill_group(self) -> None:
        """End the recorder's process group, the recorder and whatever its source started,
        before the recorder is reaped (its id cannot have been reused yet)."""
        pid = self.process.pid
        if pid is None:
            return
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:  # the group is gone (or was never made): the process alone
            if self.process.is_alive():
                self.process.kill()
        except PermissionError:
            self.process.kill()
        self.process.join()


def spool_summary(spool: Spool) -> dict[str, object]:
    summary = asdict(spool)
    summary["path"] = str(spool.path)
    del summary["timestamps"]
    return summary

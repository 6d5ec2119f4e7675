"""Eideticker's green and red screens on a phone: labd serves the pages (labd.capture's
SyncPages), the phone reaches them on its own loopback through `adb reverse`, its browser
shows them; screenshots tell when they are up and when the screen has come to rest. The
recording between them is analysed in a process of its own."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from labd.capture import (
    AnalysisOptions,
    Artifacts,
    CaptureError,
    Checkerboard,
    Frame,
    Recorder,
    Spool,
    SyncPages,
    VideoFile,
    analyze,
    fraction_matching,
    gesture_metrics,
)
from labd.sdk import InfrastructureError, TestFailure
from labd_android.screen import AndroidScreen

GREEN, RED = (0, 255, 0), (255, 0, 0)
# screenrecord's encoder takes a moment to start: the green screen waits for this many frames.
STREAMING_FRAMES = 5
# A sync screen stays this long once seen: several frames of it reach the recording, however
# the encoder compressed its first one.
HOLD_S = 0.3
BROWSERS = {"chromium": "com.android.chrome", "firefox": "org.mozilla.firefox"}

log = structlog.get_logger("labd.android")


def shows(frame: np.ndarray, rgb: tuple[int, int, int]) -> bool:
    """Most of the lower half is this colour (a browser's bar is at the top)."""
    return fraction_matching(frame[frame.shape[0] // 2 :], rgb, 60) > 0.9


@dataclass
class PhoneSync:
    screen: AndroidScreen
    browser: str  # the package that shows the sync pages
    pages: SyncPages | None = None
    proxy: str = ""

    async def start(self, proxy: str = "") -> None:
        """Sync pages served and reversed; with `proxy` (the job's replay server, already on
        the phone's loopback), the phone's HTTP proxy until `stop`."""
        self.pages = SyncPages()
        port = await self.pages.start()
        await asyncio.to_thread(self.screen.reverse, port)
        if proxy:
            await asyncio.to_thread(self.screen.set_proxy, proxy)
            self.proxy = proxy

    async def show(self, rgb: tuple[int, int, int], next_url: str = "") -> np.ndarray:
        """The colour full screen in the browser, once it is on screen (that screenshot);
        with `next_url`, a tap on it loads that page."""
        assert self.pages is not None
        await asyncio.to_thread(self.screen.view, self.pages.url(rgb, next_url), self.browser)
        name = {GREEN: "green", RED: "red"}.get(rgb, str(rgb))
        shown = await self.until(lambda f: shows(f, rgb), 20, f"the {name} screen did not show")
        await asyncio.sleep(HOLD_S)
        return shown

    async def until(self, test: Any, seconds: float, error: str) -> np.ndarray:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            frame = await asyncio.to_thread(self.screen.screenshot)
            if test(frame):
                return frame
            await asyncio.sleep(0.05)
        raise TestFailure(error)

    async def until_quiet(
        self, quiet_ms: float, timeout_s: float, unlike: np.ndarray | None = None
    ) -> None:
        """The screen stayed still for quiet_ms (and, given `unlike`, a screenshot taken
        before the action, only once it differs from that)."""
        began = time.monotonic()
        previous = await asyncio.to_thread(self.screen.screenshot)
        moved = unlike is None or not np.array_equal(previous, unlike)
        still_since = time.monotonic()
        while True:
            await asyncio.sleep(0.05)
            frame = await asyncio.to_thread(self.screen.screenshot)
            now = time.monotonic()
            if not np.array_equal(frame, previous):
                still_since = now
            moved = moved or unlike is None or not np.array_equal(frame, unlike)
            previous = frame
            if moved and (now - still_since) * 1000 >= quiet_ms:
                return
            if now - began > timeout_s:
                why = "the screen kept changing" if moved else "nothing changed"
                raise TestFailure(f"the screen did not come to rest within {timeout_s:g} s ({why})")

    async def stop(self) -> None:
        if self.proxy:
            try:
                await asyncio.to_thread(self.screen.set_proxy, "")
            except InfrastructureError as e:  # the device went away: the job's outcome says so
                log.warning("the phone's HTTP proxy is still set", proxy=self.proxy, error=str(e))
            self.proxy = ""
        if self.pages is not None:
            await self.pages.stop()
            self.pages = None


async def start_recording(recorder: Recorder) -> None:
    """The recorder started and its stream flowing (screenrecord's encoder takes a moment):
    a capture that cannot start is the device's or the host's failure, not the test's."""
    try:
        await asyncio.to_thread(recorder.start)
        await asyncio.to_thread(recorder.wait_frames, STREAMING_FRAMES, 20)
    except CaptureError as e:
        await stop_recording(recorder)  # its own reason, when the process recorded one
        raise InfrastructureError(f"screenrecord: {e}") from e


async def stop_recording(recorder: Recorder) -> Spool:
    try:
        return await asyncio.to_thread(recorder.stop)
    except CaptureError as e:
        raise InfrastructureError(f"screenrecord: {e}") from e


async def analysed(
    pool: Executor,
    spool: Spool,
    artifacts: Artifacts,
    zero: float | None,
    inputs_ms: list[float] | None = None,
    checkerboard: bool = False,
) -> dict[str, Any]:
    """`analyse` in the scenario's process pool (off the event loop); the spool is removed
    after. A recording the analysis cannot trust at all fails the iteration, with why."""
    loop = asyncio.get_running_loop()
    args = (spool.path, spool.timestamps, artifacts, zero, inputs_ms, checkerboard)
    try:
        return await loop.run_in_executor(pool, analyse, *args)
    except CaptureError as e:
        if spool.ended_early:  # the screen stream was cut mid-run (a replug, adb gone)
            raise InfrastructureError(
                f"screenrecord: {spool.ended_early}; {spool.failure(e)}"
            ) from e
        raise TestFailure(spool.failure(e)) from e
    finally:
        spool.path.unlink(missing_ok=True)


def capture_quality(result: dict[str, Any], spool: Spool) -> dict[str, float]:
    """The values that say whether the others can be trusted."""
    dropped = result["dropped_frames"] + spool.dropped
    return {"sync_confidence": result["sync_confidence"], "dropped_frames": float(dropped)}


def artifacts_in(folder: Path, keep: bool) -> Artifacts:
    if not keep:
        return Artifacts()
    return Artifacts(folder / "video.webm", folder / "heatmap.png", folder / "progress.json")


def analyse(
    path: Path,
    timestamps: list[float],
    artifacts: Artifacts,
    zero: float | None,
    inputs_ms: list[float] | None = None,
    checkerboard: bool = False,
) -> dict[str, Any]:
    """In the analysis process: the visual metrics (from `zero`, a capture timestamp, when
    given) and, with `inputs_ms`, the gesture's motion metrics on the same clock."""
    options = AnalysisOptions(
        time_zero_ms=zero, checkerboard=Checkerboard() if checkerboard else None
    )
    result = analyze(VideoFile(path, timestamps), options, artifacts)
    out = result.model_dump()
    if inputs_ms is not None:
        frames = [Frame(f.index, timestamps[f.index], f.unique) for f in result.frames]
        out["motion"] = gesture_metrics(frames, inputs_ms, result.variable_frame_rate)
    return out

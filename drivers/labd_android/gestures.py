"""The gesture scenario (Eideticker's scrolling and panning tests) on a phone: per iteration a
green screen, the app activity or page opened, a scripted gesture sequence sent through the
persistent input shell, the screen left to come to rest, red; `screenrecord` films it all.

From the frames: unique frame rate and frame-time percentiles while the content moved, jank
(new frames later than the frame rate allows), checkerboarding (Fennec's unpainted-area
pattern), dropped frames, sync confidence, and the time from each input to the first change
it caused. The video, heat map and per-frame progress are kept beside the numbers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from labd.capture import Recorder, untrustworthy
from labd.sdk import (
    LATENCY_METRICS,
    MetricSpec,
    RunContext,
    Scenario,
    TestFailure,
    TouchInput,
    keep_latencies,
    take_latencies,
)
from labd_android.gesture_steps import GestureStep, refused_steps
from labd_android.names import Component, Package
from labd_android.pageload import DEVTOOLS
from labd_android.screen import AndroidScreen
from labd_android.sync import (
    BROWSERS,
    GREEN,
    RED,
    PhoneSync,
    analysed,
    artifacts_in,
    capture_quality,
    start_recording,
    stop_recording,
)
from labd_browser.devtools import PageSilent, cdp_page
from labd_browser.pageload import http_url

MOTION = ("unique_fps", "frame_time_p50_ms", "frame_time_p90_ms", "frame_time_p99_ms",
          "janky_frames", "missed_frames", "input_to_first_change_ms")  # fmt: skip


class GestureParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    activity: Component = Field("", description="The app to open, package/activity (or url).")
    url: str = Field("", description="A page to open in the browser (or activity).")
    browser: str = Field(
        "chromium", description="chromium or firefox: whose Android app shows pages."
    )
    package: Package = Field("", description="The browser's package, if not the usual one.")
    steps: list[GestureStep] = Field(min_length=1, description="The gesture script.")
    open_timeout_s: float = Field(30, gt=0, le=600, description="Longest wait for the target.")
    settle_ms: float = Field(
        800, ge=100, le=60_000, description="Still this long: the target is open, the fling over."
    )
    fps: float = Field(60, gt=0, le=120, description="The capture's nominal frame rate.")
    checkerboard: bool = Field(True, description="Measure Fennec-style checkerboarding.")
    keep_video: bool = Field(True, description="Keep video, heat map and progress per iteration.")
    min_sync_confidence: float = Field(0.9, ge=0, le=1)
    max_dropped_frames: int = Field(2, ge=0)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        return http_url(url) if url else url

    @model_validator(mode="after")
    def _one_target(self) -> GestureParams:
        if bool(self.activity) == bool(self.url):
            raise ValueError("give exactly one of activity (package/activity) and url")
        if not self.package and self.browser not in BROWSERS:
            raise ValueError(f"browser {self.browser!r}: chromium or firefox, or give package")
        return self

    @property
    def browser_package(self) -> str:
        return self.package or BROWSERS[self.browser]


class Gestures(Scenario[GestureParams]):
    name = "gestures"
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = (
        MetricSpec(name="unique_fps", unit="fps", higher_is_better=True),
        MetricSpec(name="unique_frames", unit="frames", higher_is_better=True),
        *(MetricSpec(name=n, unit="ms") for n in MOTION if n.endswith("_ms")),
        MetricSpec(name="janky_frames", unit="frames"),
        MetricSpec(name="missed_frames", unit="frames"),
        MetricSpec(name="checkerboard_percent", unit="%"),
        MetricSpec(name="sync_confidence", unit="ratio", higher_is_better=True),
        MetricSpec(name="dropped_frames", unit="frames"),
        *LATENCY_METRICS,
    )
    bindings: ClassVar = {"screen": AndroidScreen, "input": TouchInput}
    screen: AndroidScreen
    input: TouchInput

    def __init__(self, params: GestureParams, ctx: RunContext) -> None:
        super().__init__(params, ctx)
        self.sync = PhoneSync(self.screen, params.browser_package)
        self.size = (0, 0)
        self.pool = concurrent.futures.ProcessPoolExecutor(1)  # analysis off the event loop

    @classmethod
    def check(cls, params: GestureParams) -> list[str]:
        return refused_steps(params.steps)

    async def setup(self) -> None:
        self.size = await asyncio.to_thread(self.screen.size)
        proxy = self.ctx.network.get("address", "")  # a job's replay server, for its url
        await self.sync.start(proxy=proxy)
        self.ctx.fingerprint["screen"] = {"size": list(self.size), "capture": "screenrecord"}

    async def run_iteration(self, index: int) -> dict[str, float]:
        p = self.params
        self.ctx.fingerprint.pop("artifacts", None)  # the last iteration's
        folder = self.ctx.workdir / f"iteration-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        recorder = Recorder(self.screen.capture(p.fps, self.size), folder / "capture.avi")
        await start_recording(recorder)
        take_latencies(self.input)  # events before this iteration are not its own
        try:
            green = await self.sync.show(GREEN)
            await self._open_target()
            await self.sync.until_quiet(p.settle_ms, p.open_timeout_s, unlike=green)
            if p.url:
                await self._page_shown()
            inputs = await asyncio.to_thread(self._play)
            await self.sync.until_quiet(p.settle_ms, p.open_timeout_s)
            await self.sync.show(RED)
        finally:
            spool = await stop_recording(recorder)
        artifacts = artifacts_in(folder, p.keep_video)
        result = await analysed(self.pool, spool, artifacts, None, inputs, p.checkerboard)
        self.ctx.fingerprint["artifacts"] = result["artifacts"]
        values: dict[str, float] = dict(result["motion"])
        if not values.get("unique_frames"):
            raise TestFailure("nothing on screen changed after the first input")
        values |= capture_quality(result, spool)
        if result["checkerboard_percent"] is not None:
            values["checkerboard_percent"] = result["checkerboard_percent"]
        self.ctx.flags += untrustworthy(values, p.min_sync_confidence, p.max_dropped_frames)
        latencies = take_latencies(self.input)
        return values | keep_latencies(latencies, folder, self.ctx.fingerprint)

    async def _open_target(self) -> None:
        if self.params.activity:
            await asyncio.to_thread(self.screen.start_activity, self.params.activity)
        else:
            await asyncio.to_thread(self.screen.view, self.params.url, self.params.browser_package)

    async def _page_shown(self) -> None:
        """TestFailure when the browser shows its error page, not the page: its flings were
        measured as the page's (a tester's page that did not load 'succeeded'). A phone whose
        Chrome exposes no DevTools, or a page still busy, is left to the pixels."""
        port = await asyncio.to_thread(self.screen.forward, DEVTOOLS)
        try:
            state = await cdp_page(port)
        except PageSilent:
            return
        finally:
            await asyncio.to_thread(self.screen.remove_forward, port)
        if state is not None and state.failure:
            raise TestFailure(f"{self.params.url} did not load: {state.failure}")

    def _play(self) -> list[float]:
        """The script, timed: each input's dispatch time (ms, the capture's clock)."""
        sent: list[float] = []
        for step in self.params.steps:
            for _ in range(step.repeat):
                if step.kind != "pause":
                    sent.append(time.monotonic() * 1000)
                self._send(step)
                time.sleep((step.duration_ms or 0) / 1000 if step.kind == "pause" else 0)
                time.sleep(step.then_ms / 1000)
        return sent

    def _send(self, step: GestureStep) -> None:
        if step.kind in ("swipe", "fling"):
            x1, y1, x2, y2, duration = step.swipe(self.size)
            self.input.swipe(x1, y1, x2, y2, duration)
        elif step.kind == "tap":
            self.input.tap(
                step.x if step.x is not None else self.size[0] // 2,
                step.y if step.y is not None else self.size[1] // 2,
            )
        elif step.kind == "key":
            self.input.key(step.key)

    async def teardown(self) -> None:
        await self.sync.stop()
        await asyncio.to_thread(self.screen.close)
        self.pool.shutdown(cancel_futures=True)

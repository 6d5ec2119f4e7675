"""Page load in a phone's browser (Chrome or Firefox for Android, by package): the X11 page
load's manifest with `platform = "android"`. Per iteration the browser is stopped (a cold
start), a green page labd serves is shown, a tap on it loads the page (the page's own script
follows the tap: no URL bar is typed into while the clock runs), red once the screen is still
(and, where Chrome's DevTools answers, the page's load event has fired);
`screenrecord` films it and the same visual metrics are read from the frames.

The job's replay server is reached through `adb reverse` and set as the phone's HTTP proxy
(Chrome follows `settings global http_proxy`). Navigation Timing is read from Chrome's
DevTools socket through `adb forward` where the phone exposes it; Firefox for Android speaks
no Chrome DevTools there, and the fingerprint says so instead of a number.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

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
from labd_android.names import Package
from labd_android.screen import AndroidScreen
from labd_android.sync import (
    BROWSERS,
    GREEN,
    RED,
    PhoneSync,
    analysed,
    artifacts_in,
    capture_quality,
    shows,
    start_recording,
    stop_recording,
)
from labd_browser.devtools import BROWSER_MARKS, PageSilent, PageState, cdp_page
from labd_browser.pageload import VISUAL, http_url, load_never_fired, longer_than_quiet

DEVTOOLS = "localabstract:chrome_devtools_remote"


class PhonePageLoadParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, description="The page (served by the job's replay server).")
    browser: str = Field("chromium", description="chromium (Chrome) or firefox")
    package: Package = Field("", description="The browser's package, if not the usual one.")
    quiet_ms: float = Field(1000, ge=100, le=60_000, description="Still this long: loaded.")
    load_timeout_s: float = Field(60, gt=0, le=170, description="Longest page load.")
    fps: float = Field(60, gt=0, le=120, description="The capture's nominal frame rate.")
    keep_video: bool = Field(True, description="Keep video, heat map and progress.")
    fresh_browser: bool = Field(True, description="Force-stop the browser before each load.")
    min_sync_confidence: float = Field(0.9, ge=0, le=1)
    max_dropped_frames: int = Field(2, ge=0)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        return http_url(url)

    @field_validator("load_timeout_s")
    @classmethod
    def _outlasts_quiet(cls, value: float, info: ValidationInfo) -> float:
        return longer_than_quiet(value, info)

    @property
    def browser_package(self) -> str:
        return self.package or BROWSERS.get(self.browser, "")


class PhonePageLoad(Scenario[PhonePageLoadParams]):
    name = "page-load"
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = (
        *(MetricSpec(name=n, unit="ms") for n in VISUAL),
        MetricSpec(name="sync_confidence", unit="ratio", higher_is_better=True),
        MetricSpec(name="dropped_frames", unit="frames"),
        *(MetricSpec(name=f"browser.{n}", unit="ms") for n in BROWSER_MARKS),
        *LATENCY_METRICS,
    )
    bindings: ClassVar = {"screen": AndroidScreen, "input": TouchInput}
    screen: AndroidScreen
    input: TouchInput

    def __init__(self, params: PhonePageLoadParams, ctx: RunContext) -> None:
        super().__init__(params, ctx)
        self.sync = PhoneSync(self.screen, params.browser_package)
        self.size = (0, 0)
        self.pool = concurrent.futures.ProcessPoolExecutor(1)

    @classmethod
    def check(cls, params: PhonePageLoadParams) -> list[str]:
        if not params.browser_package:
            return [f"params.browser: {params.browser!r}: chromium or firefox, or give package"]
        return []

    async def setup(self) -> None:
        self.size = await asyncio.to_thread(self.screen.size)
        address = self.ctx.network.get("address", "")  # the replay server, reversed
        await self.sync.start(proxy=address)
        self.ctx.fingerprint["browser"] = {
            "package": self.params.browser_package,
            "proxy": address or "none",
            "navigation_timing": self._timing_source(),
        }

    def _timing_source(self) -> str:
        if self.params.browser == "chromium" and not self.params.package:
            return "Chrome DevTools over adb forward (localabstract:chrome_devtools_remote)"
        return "not read: only Chrome's DevTools socket is read over adb"

    async def run_iteration(self, index: int) -> dict[str, float]:
        p = self.params
        self.ctx.fingerprint.pop("artifacts", None)
        folder = self.ctx.workdir / f"iteration-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        if p.fresh_browser:
            await asyncio.to_thread(self.screen.force_stop, p.browser_package)
        recorder = Recorder(self.screen.capture(p.fps, self.size), folder / "capture.avi")
        await start_recording(recorder)
        take_latencies(self.input)  # events before this iteration are not its own
        timing: dict[str, float] = {}
        try:
            green = await self.sync.show(GREEN, next_url=p.url)
            zero = time.monotonic() * 1000  # the tap goes out: time zero
            await asyncio.to_thread(self.input.tap, self.size[0] // 2, self.size[1] * 2 // 3)
            await self.sync.until_quiet(p.quiet_ms, p.load_timeout_s, unlike=green)
            if shows(await asyncio.to_thread(self.screen.screenshot), RED):
                raise TestFailure("the page showed the end colour itself, before labd's red")
            timing = await self._navigation_timing(zero / 1000 + p.load_timeout_s)
            await self.sync.show(RED)
        finally:
            spool = await stop_recording(recorder)
        result = await analysed(self.pool, spool, artifacts_in(folder, p.keep_video), zero)
        self.ctx.fingerprint["artifacts"] = result["artifacts"]
        values = {name: float(result[name]) for name in VISUAL if result[name] is not None}
        values |= capture_quality(result, spool)
        self.ctx.flags += untrustworthy(values, p.min_sync_confidence, p.max_dropped_frames)
        latency = keep_latencies(take_latencies(self.input), folder, self.ctx.fingerprint)
        return values | timing | latency

    async def _navigation_timing(self, deadline: float) -> dict[str, float]:
        """Chrome's Navigation Timing of the page on screen, once its load event has fired
        (asked four times a second until `deadline`, monotonic seconds; the screen then waited on
        to stay still quiet_ms more, as an image is drawn after it); {} (and why, in the
        fingerprint) when the phone exposes none; TestFailure when Chrome shows its error page
        or the server answered an HTTP error. A load that has not fired by then is flagged."""
        if not self._timing_source().startswith("Chrome"):
            return {}
        p = self.params
        port = await asyncio.to_thread(self.screen.forward, DEVTOOLS)
        state: PageState | None = None
        silent: PageSilent | None = None  # the page's last word was none
        waited = False
        try:
            while True:
                try:
                    state, silent = await cdp_page(port), None
                except PageSilent as e:  # not yet a verdict: a page of megabytes still parsing
                    silent = e
                else:
                    if not state or state.failure or state.loaded:
                        break
                if time.monotonic() >= deadline:
                    break
                await asyncio.sleep(0.25)
                waited = True
        finally:
            await asyncio.to_thread(self.screen.remove_forward, port)
        if silent is not None:
            raise silent.verdict(p.load_timeout_s)
        if state is None:
            self.ctx.fingerprint["browser"]["navigation_timing"] = (
                "not exposed: nothing answered on chrome_devtools_remote "
                "(USB debugging on? Chrome in front?)"
            )
            return {}
        if state.failure:
            raise TestFailure(f"{p.url} did not load: {state.failure}")
        if not state.loaded:
            self.ctx.flags.append(load_never_fired(p.load_timeout_s))
        elif waited:
            await self.sync.until_quiet(p.quiet_ms, p.load_timeout_s)
        return state.marks

    async def teardown(self) -> None:
        await self.sync.stop()
        await asyncio.to_thread(self.screen.close)
        self.pool.shutdown(cancel_futures=True)

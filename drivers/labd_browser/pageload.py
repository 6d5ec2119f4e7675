"""The page-load scenario (Eideticker's): per iteration a full-screen green, the page loaded
by typing its URL (the desktop's keys, as a user would), red once the page is done, the frames
between analysed for what the user saw; the browser's own Navigation Timing beside the pixels.
It runs on any Desktop (X11, Windows) through the platform-neutral controller."""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from labd.capture import (
    AnalysisOptions,
    Artifacts,
    CaptureError,
    Recorder,
    VideoFile,
    analyze,
    untrustworthy,
)
from labd.process import program_env
from labd.sdk import (
    LATENCY_METRICS,
    TYPING_DELAY_MS,
    CannotStart,
    Controller,
    DesktopInput,
    InfrastructureError,
    MetricSpec,
    Policy,
    ProgramNotFound,
    RunContext,
    Scenario,
    TestFailure,
    UsageError,
    ascii_url,
    keep_latencies,
    take_latencies,
)
from labd_browser.browsers import KNOWN, argument_problems, find, launch_command, version
from labd_browser.desktop import Desktop
from labd_browser.devtools import BROWSER_MARKS, PageSilent, PageState, read_page

GREEN, RED = (0, 255, 0), (255, 0, 0)
Stabiliser = Literal["exclusive_cpu", "no_aslr", "tmpfs"]
STABILISERS: tuple[Stabiliser, ...] = ("exclusive_cpu", "no_aslr", "tmpfs")
DEFAULT_STABILISERS: tuple[Stabiliser, ...] = ("tmpfs",)  # the one that helped: docs/devices.md
TMPFS = Path("/dev/shm")
WINDOW_S = 30.0  # a browser's first window, on a loaded host
VISUAL = ("visually_complete_ms", "speed_index", "first_visual_change_ms", "last_visual_change_ms",
          "visual_complete_85_ms", "visual_complete_95_ms", "visual_complete_99_ms")  # fmt: skip


class PageLoadParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=2048,
        description="The page: an http(s) URL with a host (served by the job's replay server, "
        "or any server); typed as a user would, so no spaces or control characters.",
    )
    browser: str = Field("chromium", description="chromium or firefox")
    command: list[str] = Field(
        default_factory=list, description="The browser's program, if not the default."
    )
    quiet_ms: float = Field(
        1000,
        ge=100,
        le=60_000,
        description="No pixel change this long, after the browser's load event: the page is done.",
    )
    load_timeout_s: float = Field(
        60, gt=0, le=3600, description="Longest page load before the iteration fails."
    )
    fps: float = Field(30, gt=0, le=120, description="Capture frame rate.")
    stabilise: list[Stabiliser] = Field(
        default_factory=lambda: list(DEFAULT_STABILISERS),
        description="Larres et al.'s stabilisation: exclusive_cpu (the browser alone on half the "
        "CPUs, labd's capture on the others), no_aslr (no address-space randomisation), "
        "tmpfs (profile in RAM). true: all of them, false: none.",
    )
    keep_video: bool = Field(
        True, description="Keep the video, heat map and progress of each iteration."
    )
    fresh_browser: bool = Field(
        True, description="A new browser and profile for every iteration: cold loads, no cache."
    )
    min_sync_confidence: float = Field(
        0.9,
        ge=0,
        le=1,
        description="An iteration whose green/red sync was found with less confidence is "
        "flagged and set aside: its times may be measured from the wrong frames.",
    )
    max_dropped_frames: int = Field(
        2,
        ge=0,
        description="An iteration whose capture dropped more frames is flagged and set aside: "
        "a dropped frame can hide the change that ends a visual metric.",
    )

    @field_validator("url")
    @classmethod
    def _a_url(cls, value: str) -> str:
        if urlsplit(value).scheme.lower() == "file":
            # The URL is opened from labd's green sync page, a data: page, which browsers do
            # not let open local files: every iteration timed out on the green screen.
            raise ValueError(
                "a file: URL cannot be opened from labd's sync page (browsers do not let a "
                "data: page open local files): serve the page over http, e.g. `python3 -m "
                "http.server` in its folder, or record it with `labd replay record`"
            )
        return http_url(value)

    @field_validator("load_timeout_s")
    @classmethod
    def _outlasts_quiet(cls, value: float, info: ValidationInfo) -> float:
        return longer_than_quiet(value, info)

    @field_validator("stabilise", mode="before")
    @classmethod
    def _all_or_none(cls, value: Any) -> Any:
        return list(STABILISERS) if value is True else [] if value is False else value


class PageLoad(Scenario[PageLoadParams]):
    name = "page-load"
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = (
        *(MetricSpec(name=n, unit="ms") for n in VISUAL),  # Speed Index too, as WebPageTest
        MetricSpec(name="sync_confidence", unit="ratio", higher_is_better=True),
        MetricSpec(name="dropped_frames", unit="frames"),
        *(MetricSpec(name=f"browser.{n}", unit="ms") for n in BROWSER_MARKS),
        *LATENCY_METRICS,
    )

    bindings: ClassVar = {"desktop": Desktop}
    desktop: Desktop

    def __init__(self, params: PageLoadParams, ctx: RunContext) -> None:
        super().__init__(params, ctx)
        self.size = self.desktop.size
        self.browser: subprocess.Popen[bytes] | None = None
        self.profile: Path | None = None
        self.input: DesktopInput | None = None
        self.cpus: set[int] | None = None  # the browser's, when it has CPUs of its own
        self.capture_cpus: set[int] | None = None
        self.pool = concurrent.futures.ProcessPoolExecutor(1)  # analysis off the event loop

    @classmethod
    def check(cls, params: PageLoadParams) -> list[str]:
        if params.command:
            return [f"params.{p}" for p in argument_problems(params.command)]
        if params.browser not in KNOWN:
            return [
                f"params: browser {params.browser!r}: expected chromium or firefox (or a command)"
            ]
        return []

    @classmethod
    def policy_problems(cls, params: PageLoadParams, policy: Policy) -> list[str]:
        """A job's own browser `command` is a program like the command scenario's: allowed
        by policy.programs or refused. Without one, labd starts the browser it knows for
        `browser`, found on the policy's path: the admin's choice of driver, not the job's."""
        if argument_problems(params.command):
            return []  # `check` named them
        try:
            find(params.browser, params.command, policy)
        except ProgramNotFound as e:
            return [f"params.command: {e}"]
        except UsageError as e:
            return [f"params: {e}"]
        except ValueError as e:
            return [f"params.command: {e}" if params.command else f"params: {e}"]
        return []

    async def setup(self) -> None:
        self.input = await asyncio.to_thread(self.desktop.open)
        if not self.params.fresh_browser:
            await self._start_browser()

    async def _start_browser(self) -> None:
        await asyncio.to_thread(self._launch)
        await self._wait_window()

    def _launch(self) -> None:
        """A fresh profile and the browser, stabilised as the job asks."""
        p = self.params
        try:  # checked at submit; the policy may have changed since (a restart)
            program = find(p.browser, p.command, self.ctx.policy)
        except UsageError as e:  # labd's own browser is gone from this host
            raise InfrastructureError(str(e)) from e
        except ValueError as e:
            raise CannotStart(f"params.command: {e}") from e
        tmpfs = "tmpfs" in p.stabilise and TMPFS.is_dir()
        self.profile = Path(tempfile.mkdtemp(prefix="labd-browser-", dir=TMPFS if tmpfs else None))
        proxy = self.ctx.network.get("proxy", "")
        argv = launch_command(p.browser, program, self.profile, self.size, proxy)
        applies = self.desktop.stabilisers
        if "exclusive_cpu" in p.stabilise and "exclusive_cpu" in applies:
            self.cpus, self.capture_cpus = self.desktop.split_cpus()
        no_aslr = "no_aslr" in p.stabilise and "no_aslr" in applies
        run_as = self.ctx.policy.run_as
        env = program_env(self.ctx.policy.path, str(self.profile))  # the profile is its home
        self.browser = self.desktop.start(argv, self.profile, self.cpus, no_aslr, run_as, env)
        self.ctx.fingerprint["browser"] = {
            "name": p.browser,
            "command": argv[0],
            "version": version(argv[0]),
            "profile": "fresh, tmpfs" if tmpfs else "fresh",
            "run_as": run_as.describe() if run_as else "labd's own user",
        }
        self.ctx.fingerprint["stabilisation"] = {
            "browser_cpus": sorted(self.cpus) if self.cpus else None,
            "capture_cpus": sorted(self.capture_cpus) if self.capture_cpus else None,
            "aslr": not no_aslr,
            "profile_tmpfs": tmpfs,
        }

    async def _wait_window(self) -> None:
        """The browser's window, or why not. The job's own `command` failing to start is the
        job's (every attempt would fail alike: CannotStart, the device is not blamed); the
        browser labd itself found failing is the device's (a broken install, a lost display)."""
        assert self.browser is not None
        if self.params.command:
            fail: type[Exception] = CannotStart
            who = f"the job's browser command {self.params.command[0]!r}"
        else:
            fail, who = InfrastructureError, self.params.browser
        deadline = time.monotonic() + WINDOW_S
        while time.monotonic() < deadline:
            if self.browser.poll() is not None:
                raise fail(f"{who} exited at start (status {self.browser.returncode})")
            if await asyncio.to_thread(self.desktop.has_window, self.browser.pid):
                await asyncio.sleep(1.0)  # let it finish drawing its chrome
                return
            await asyncio.sleep(0.2)
        raise fail(f"{who} opened no window within {WINDOW_S:g} s")

    async def run_iteration(self, index: int) -> dict[str, float]:
        if not self.params.fresh_browser:
            return await self._iteration(index)
        await self._start_browser()
        try:
            return await self._iteration(index)
        finally:
            await self._stop_browser()

    async def _iteration(self, index: int) -> dict[str, float]:
        assert self.input is not None
        self.ctx.fingerprint.pop("artifacts", None)  # the last iteration's
        p = self.params
        controller = Controller(self.input, self.size)
        folder = self.ctx.workdir / f"iteration-{index}"
        folder.mkdir(parents=True, exist_ok=True)
        spool_path = folder / "capture.avi"
        recorder = Recorder(
            self.desktop.capture(p.fps),
            spool_path,
            seconds=p.load_timeout_s + 60,
            cpus=self.capture_cpus,  # off the browser's CPUs
        )
        await asyncio.to_thread(recorder.start)
        take_latencies(self.input)  # events before this iteration are not its own
        timing: dict[str, float] = {}
        try:
            await controller.show_color(GREEN, navigator=True)
            await self._until(lambda frame: _is(frame, GREEN), 15, "the green screen did not show")
            # into the green page; the same address in ASCII: no keycode remapped for it
            await asyncio.to_thread(self.input.text, ascii_url(p.url), TYPING_DELAY_MS)
            # What the screen showed before Enter: a page drawn before the first grab after
            # it (a loaded host) must count as drawn, not as the screen it started from.
            before = await asyncio.to_thread(self._grab)
            # Time zero as Enter is sent, not once the dispatch thread has handed back: on a
            # loaded host the hand-back came after the page's first frame (by 3 ms in a
            # stress run), which the analysis rightly refuses.
            navigated = time.monotonic() * 1000
            await controller.press("Return")
            state = await self._until_done(before, navigated / 1000)
            if state is not None and state.failure:
                raise TestFailure(f"{p.url} did not load: {state.failure}")
            if _is(await asyncio.to_thread(self._grab), RED):
                raise TestFailure(
                    "the page showed the end colour itself, before labd's red screen: "
                    "the end of the load cannot be told from the sync screen"
                )
            timing = state.marks if state is not None else {}
            red_at = time.monotonic() * 1000
            await asyncio.to_thread(self.desktop.overlay, RED)
            await self._until(lambda frame: _is(frame, RED), 15, "the red screen did not show")
            await asyncio.sleep(0.3)
        finally:
            spool = await asyncio.to_thread(recorder.stop)
            await asyncio.to_thread(self.desktop.remove_overlays)
        artifacts = (
            Artifacts(folder / "video.webm", folder / "heatmap.png", folder / "progress.json")
            if p.keep_video
            else Artifacts()
        )
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                self.pool, _analyze, spool.path, spool.timestamps, artifacts, navigated, p.fps
            )
        except CaptureError as e:
            if spool.ended_early:  # the display or capture source went away mid-run
                raise InfrastructureError(
                    f"capture: {spool.ended_early}; {spool.failure(e)}"
                ) from e
            raise TestFailure(spool.failure(e)) from e
        finally:
            spool.path.unlink(missing_ok=True)
        end_ms = spool.timestamps[result["end_frame"]]
        if end_ms < red_at - 1000 / p.fps:
            raise TestFailure(
                f"the page showed the end colour itself, {red_at - end_ms:.0f} ms "
                "before labd's red screen"
            )
        self.ctx.fingerprint["artifacts"] = result["artifacts"]  # kept with this iteration
        latency = keep_latencies(take_latencies(self.input), folder, self.ctx.fingerprint)
        values = {name: float(result[name]) for name in VISUAL if result[name] is not None}
        values["sync_confidence"] = result["sync_confidence"]
        # The gaps in the analysed span hold every frame lost there (late grabs, a full queue).
        values["dropped_frames"] = float(result["dropped_frames"])
        self.ctx.flags += untrustworthy(values, p.min_sync_confidence, p.max_dropped_frames)
        return values | timing | latency

    async def _until(self, test: Any, seconds: float, error: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._browser_alive()  # else "the green screen did not show" named no browser
            if test(await asyncio.to_thread(self._grab)):
                return
            await asyncio.sleep(0.05)
        raise TestFailure(error)

    async def _until_done(self, before: np.ndarray, navigated: float) -> PageState | None:
        """Done: the page's content area changed from `before` (grabbed just before the
        navigation at `navigated`, monotonic seconds), the browser says its load event has fired
        (a still screen while an image is on its way is not the end), and the screen stayed
        still for quiet_ms after both (an image is drawn a frame after the load event). The
        page as the browser last saw it, or None where its remote protocol cannot be reached
        (the pixels decide)."""
        p = self.params
        area = _content_area(before)  # the browser's chrome (a loading spinner) left out
        before = before[area]
        began = still_since = asked_at = time.monotonic()
        first = previous = before
        changed = False
        state: PageState | None = None
        silent: PageSilent | None = None  # the page's last word was none
        loaded_at: float | None = None
        while True:
            await asyncio.sleep(0.05)
            self._browser_alive()
            frame = (await asyncio.to_thread(self._grab))[area]
            now = time.monotonic()
            if not np.array_equal(frame, previous):
                still_since = now
                changed = changed or not np.array_equal(frame, first)
            previous = frame
            still = (now - still_since) * 1000 >= p.quiet_ms
            if still and loaded_at is None and now >= asked_at:
                try:
                    state = await read_page(p.browser, self.profile) if self.profile else None
                    silent = None
                except PageSilent as e:  # not yet a verdict: a page of megabytes still parsing
                    silent = e
                else:
                    if state is None and changed:  # no second opinion: the pixels alone
                        return None
                    if state is not None and state.failure:
                        return state
                    if state is not None and state.navigated and state.loaded:
                        loaded_at = navigated + state.marks["browser.load"] / 1000
                asked_at = time.monotonic() + (0.25 if changed else 0.5)  # a light touch
            if loaded_at is not None and (now - max(still_since, loaded_at)) * 1000 >= p.quiet_ms:
                if changed:
                    return state
                raise TestFailure(
                    "the page loaded and drew nothing different from labd's green start "
                    "screen: a page all in the start colour cannot be measured"
                )
            if now - began > p.load_timeout_s:
                if silent is not None and still:
                    raise silent.verdict(p.load_timeout_s)
                if changed and still and state is not None and state.navigated:
                    self.ctx.flags.append(load_never_fired(p.load_timeout_s))
                    return state
                if changed and not still and (loaded_at is not None or await self._loaded()):
                    raise TestFailure(
                        f"the page loaded but did not come to rest within {p.load_timeout_s:g} s"
                        f": never still for quiet_ms ({p.quiet_ms:g} ms), it kept changing "
                        "(an animation, a video, a ticking clock?)"
                    )
                why = (
                    "nothing was drawn"
                    if not changed
                    else "the browser stayed on labd's start page"
                    if still
                    else "the screen kept changing"
                )
                raise TestFailure(
                    f"the page did not finish loading within {p.load_timeout_s:g} s ({why})"
                )

    def _browser_alive(self) -> None:
        """TestFailure when the browser exited: a killed browser left the display's empty root
        window, which the pixels alone took for the page, finished (a tester's find)."""
        if self.browser is not None and (status := self.browser.poll()) is not None:
            raise TestFailure(
                f"{self.params.browser} exited during the page load (status {status}): the "
                "screen no longer showed the page"
            )

    async def _loaded(self) -> bool:
        """Whether the browser says the page's load event has fired; False where it cannot."""
        try:
            state = await read_page(self.params.browser, self.profile) if self.profile else None
        except TestFailure:
            return False
        return state is not None and state.navigated and state.loaded

    def _grab(self) -> np.ndarray:
        return self.desktop.screenshot()

    async def teardown(self) -> None:
        if self.input is not None:
            await asyncio.to_thread(self.desktop.close)
        await self._stop_browser()
        self.pool.shutdown(cancel_futures=True)

    async def _stop_browser(self) -> None:
        if self.browser is not None:
            await asyncio.to_thread(self.desktop.stop, self.browser)
        self.browser = None
        if self.profile is not None:
            await asyncio.to_thread(shutil.rmtree, self.profile, True)
            self.profile = None


def _is(frame: np.ndarray, rgb: tuple[int, int, int]) -> bool:
    """Most of the frame's lower half is this colour (the browser's chrome is at the top)."""
    lower = frame[frame.shape[0] // 2 :].astype(np.int16)
    bgr = np.array(rgb[::-1], np.int16)
    return bool((np.abs(lower - bgr).sum(axis=2) < 60).mean() > 0.9)


def _content_area(frame: np.ndarray) -> tuple[slice, slice]:
    """Where the green page is drawn (the browser's content area, which the analysis keeps):
    the rows and columns mostly green; the whole frame when there is no green to go by."""
    green = np.abs(frame.astype(np.int16) - np.array(GREEN[::-1], np.int16)).sum(axis=2) < 60
    rows = np.flatnonzero(green.mean(axis=1) > 0.5)
    if rows.size == 0:
        return slice(None), slice(None)
    cols = np.flatnonzero(green[rows[0] : rows[-1] + 1].mean(axis=0) > 0.5)
    if cols.size == 0:
        return slice(None), slice(None)
    return slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)


def _analyze(
    path: Path, timestamps: list[float], artifacts: Artifacts, zero: float, fps: float
) -> dict[str, Any]:
    """In the analysis process; times from the navigation (capture times share its clock),
    frames missing counted against the rate the screen was polled at."""
    options = AnalysisOptions(time_zero_ms=zero, paced_fps=fps)
    return analyze(VideoFile(path, timestamps), options, artifacts).model_dump()


def longer_than_quiet(load_timeout_s: float, info: ValidationInfo) -> float:
    """A load time-out that leaves room for `quiet_ms` of stillness: a shorter one failed every
    iteration, saying the screen kept changing."""
    quiet_ms = info.data.get("quiet_ms")  # absent when it was itself refused
    if quiet_ms is not None and load_timeout_s * 1000 <= quiet_ms:
        raise ValueError(
            f"{load_timeout_s:g} s is not longer than quiet_ms ({quiet_ms:g} ms): a page is done "
            "only once still for quiet_ms, so no page could finish"
        )
    return load_timeout_s


def load_never_fired(load_timeout_s: float) -> str:
    """The flag of a page still on screen whose load event never came."""
    return (
        f"the browser's load event had not fired after {load_timeout_s:g} s "
        "(the screen was still): the page may not have finished drawing"
    )


def http_url(value: str) -> str:
    """`value` when it is an http(s) URL naming a host, as a page-load or gestures scenario
    takes one (on a desktop or a phone); ValueError naming what is wrong otherwise."""
    # Typed into the page: a newline is a Return, loading before time zero.
    if bad := next((c for c in value if not c.isprintable() or c.isspace()), None):
        raise ValueError(
            f"contains {bad!r} (U+{ord(bad):04X}); "
            "a URL has no spaces or control characters (percent-encode them)"
        )
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https"):
        raise ValueError("not an http or https URL")
    if not parts.hostname:
        raise ValueError("an http(s) URL must name a host")
    try:
        parts.port  # noqa: B018 (urllib checks the port when it is read)
    except ValueError as e:  # http://x:99999/
        raise ValueError(f"its port: {e}") from None
    return value

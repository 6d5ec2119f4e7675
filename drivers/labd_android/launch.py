"""The app cold-launch scenario (seed 002): per iteration force-stop, optionally drop caches,
launch through the launcher intent, collect the marks from logcat, memory at fullyLoaded."""

from __future__ import annotations

import asyncio
import queue
import re
import threading
import time
from typing import Any, ClassVar

import adbutils
from pydantic import BaseModel, ConfigDict, Field

from labd.errors import InfrastructureError, TestFailure
from labd.markers import LaunchCollector
from labd.model import MetricSpec, RunContext, Scenario
from labd_android.shell import PersistentShell

# Rooted devices only: the vendor's thermal daemon off, every core at its top frequency.
LOCK_CLOCKS = (
    "stop thermal-engine; "
    "for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > $g; done"
)
PACKAGE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$")


class LaunchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    package: str = Field(description="The app, e.g. org.mozilla.fenix.")
    activity: str = Field(
        "", description="Launcher activity; empty: resolved by the launcher intent."
    )
    app: str = Field("", description="Marker context (a Raptor origin); empty: the package.")
    drop_caches: bool = Field(False, description="Drop the page cache before each launch (root).")
    iteration_timeout_s: float = Field(60, gt=0, le=3600)
    settle_s: float = Field(1.0, ge=0, le=60, description="Wait after fullyLoaded before memory.")
    airplane_mode: bool = Field(False, description="Airplane mode during the job.")
    max_battery_temp_c: float = Field(40, description="Wait until the battery is cooler than this.")
    cool_wait_s: float = Field(
        300, ge=0, description="Longest wait for cooling; then the job fails."
    )


class AppLaunch(Scenario):
    name = "app-launch"
    Params = LaunchParams
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = ()

    def __init__(self, params: BaseModel, ctx: RunContext) -> None:
        super().__init__(params, ctx)
        self.device: adbutils.AdbDevice | None = None
        self.shell: PersistentShell | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        self.stop = threading.Event()

    @property
    def p(self) -> LaunchParams:
        assert isinstance(self.params, LaunchParams)
        return self.params

    @classmethod
    def metric_spec(cls, name: str) -> MetricSpec | None:
        """Launch marks (any name a Raptor log gives) are ms from the launch; memory is MB."""
        if name in ("coldlaunch.rss", "coldlaunch.pss", "coldlaunch.uss"):
            return MetricSpec(name=name, unit="MB")
        return MetricSpec(name=name, unit="ms")

    @classmethod
    def check(cls, params: BaseModel) -> list[str]:
        assert isinstance(params, LaunchParams)
        if not PACKAGE.match(params.package):
            return [f"params.package: {params.package!r} is not an Android package name"]
        return []

    driver: ClassVar[Any] = None  # the AndroidDriver, set on the class it hands out

    def _run(self, *argv: str) -> str:
        assert self.shell is not None
        output, status = self.shell.run(list(argv))
        if status != 0:
            raise TestFailure(f"{' '.join(argv[:2])}: exit status {status}: {output.strip()[:200]}")
        return output

    async def setup(self) -> None:
        self.device = self.driver.adb_device(self.ctx.device.id)
        self.shell = PersistentShell(self.device)
        self.ctx.fingerprint["stabilisation"] = await asyncio.to_thread(self._stabilise)
        threading.Thread(target=self._logcat, name="logcat", daemon=True).start()

    def _stabilise(self) -> dict[str, Any]:
        """Each step applied, in the order applied: what the numbers were measured under."""
        p = self.p
        steps: dict[str, Any] = {}
        self._run("svc", "power", "stayon", "true")
        steps["stay_awake"] = True
        for scale in (
            "window_animation_scale",
            "transition_animation_scale",
            "animator_duration_scale",
        ):
            self._run("settings", "put", "global", scale, "0")
        steps["animations"] = "off"
        if p.airplane_mode:
            self._run("cmd", "connectivity", "airplane-mode", "enable")
            steps["airplane_mode"] = True
        self._run("am", "kill-all")
        steps["background_apps"] = "stopped"
        assert self.shell is not None
        rooted = self.shell.run(["su", "-c", "id"])[1] == 0
        if rooted:
            self._run(
                "su",
                "-c",
                LOCK_CLOCKS,
            )
        steps["cpu_clocks"] = "locked (performance governor)" if rooted else "not locked (no root)"
        steps["battery_temp_c"] = self._wait_cool()
        return steps

    def _wait_cool(self) -> float | None:
        from labd_android.health import parse

        deadline = time.monotonic() + self.p.cool_wait_s
        while True:
            temperature = parse(self._run("dumpsys", "battery"), "", "", "").battery_temp_c
            if temperature is None or temperature < self.p.max_battery_temp_c:
                return temperature
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"battery still at {temperature:.1f} °C after {self.p.cool_wait_s:g} s "
                    f"(limit {self.p.max_battery_temp_c:g} °C)"
                )
            time.sleep(5)

    def _logcat(self) -> None:
        assert self.device is not None
        try:
            stream = self.device.shell("logcat -v threadtime -T 1", stream=True)
        except (adbutils.AdbError, OSError) as e:
            self.lines.put(f"__labd_error__ logcat: {e}")
            return
        pending = b""
        with stream:
            while not self.stop.is_set():
                try:
                    chunk = stream.conn.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                pending += chunk
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    self.lines.put(raw.decode("utf-8", "replace"))
        self.lines.put("__labd_error__ logcat ended (device gone?)")

    async def run_iteration(self, index: int) -> dict[str, float]:
        return await asyncio.to_thread(self._iteration)

    def _iteration(self) -> dict[str, float]:
        p = self.p
        self._run("am", "force-stop", p.package)
        if p.drop_caches:
            self._run("su", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches")
        while not self.lines.empty():  # marks of earlier launches are not this one's
            self.lines.get_nowait()
        collector = LaunchCollector(p.app or None)
        if p.activity:
            self._run("am", "start", "-W", "-n", f"{p.package}/{p.activity}")
        else:
            self._run("monkey", "-p", p.package, "-c", "android.intent.category.LAUNCHER", "1")
        deadline = time.monotonic() + p.iteration_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TestFailure(
                    f"no complete launch of {p.package} within {p.iteration_timeout_s:g} s"
                )
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line.startswith("__labd_error__"):
                raise InfrastructureError(line.removeprefix("__labd_error__ "))
            done = collector.feed(line)
            if done is not None and done.complete:
                time.sleep(p.settle_s)
                return {**done.metrics, **self._memory()}

    def _memory(self) -> dict[str, float]:
        """rss, pss and uss in MB from `dumpsys meminfo` at fullyLoaded."""
        text = self._run("dumpsys", "meminfo", self.p.package)
        values: dict[str, float] = {}
        for name, pattern in (("pss", r"TOTAL PSS:\s+(\d+)"), ("rss", r"TOTAL RSS:\s+(\d+)")):
            if match := re.search(pattern, text):
                values[f"coldlaunch.{name}"] = int(match.group(1)) / 1024
        # USS: the private dirty and clean columns of the TOTAL row.
        if match := re.search(r"^\s*TOTAL\s+\d+\s+(\d+)\s+(\d+)", text, re.MULTILINE):
            values["coldlaunch.uss"] = (int(match.group(1)) + int(match.group(2))) / 1024
        return values

    async def teardown(self) -> None:
        self.stop.set()
        if self.shell is not None:
            self.shell.close()

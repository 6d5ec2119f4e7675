"""The app cold-launch scenario (Raptor's, in Mozilla's Firefox OS lab): per iteration
force-stop, optionally drop caches, launch through the launcher intent, collect the marks from
logcat, memory at fullyLoaded."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from labd.markers import Iteration, LaunchCollector
from labd.sdk import InfrastructureError, MarkerStream, MetricSpec, Scenario, TestFailure
from labd_android.health import parse
from labd_android.names import Activity, Package
from labd_android.shell import PersistentShell

# Rooted devices only: the vendor's thermal daemon off, every core at its top frequency.
LOCK_CLOCKS = (
    "stop thermal-engine; "
    "for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > $g; done"
)
# After a native app's "Displayed" line, how long its "Fully drawn" line may take to come
# (apps that call reportFullyDrawn do so once their content is in).
FULLY_DRAWN_WAIT_S = 5.0


class LaunchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    package: Package = Field(min_length=1, description="The app, e.g. org.mozilla.fenix.")
    activity: Activity = Field(
        "", description="Launcher activity (.Main); empty: resolved by the launcher intent."
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


class AppLaunch(Scenario[LaunchParams]):
    name = "app-launch"
    default_metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    bindings: ClassVar = {"shell": PersistentShell, "markers": MarkerStream}
    shell: PersistentShell
    markers: MarkerStream

    @classmethod
    def metric_spec(cls, name: str) -> MetricSpec | None:
        """Launch marks (any name a Raptor log gives) are ms from the launch; memory is MB."""
        if name in ("coldlaunch.rss", "coldlaunch.pss", "coldlaunch.uss"):
            return MetricSpec(name=name, unit="MB")
        return MetricSpec(name=name, unit="ms")

    def _run(self, *argv: str) -> str:
        output, status = self.shell.run(list(argv))
        if status != 0:
            raise TestFailure(f"{' '.join(argv[:2])}: exit status {status}: {output.strip()[:200]}")
        return output

    async def setup(self) -> None:
        self.ctx.fingerprint["stabilisation"] = await asyncio.to_thread(self._stabilise)
        await self.markers.open()

    def _stabilise(self) -> dict[str, Any]:
        """Each step applied, in the order applied: what the numbers were measured under."""
        p = self.params
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
        deadline = time.monotonic() + self.params.cool_wait_s
        while True:
            temperature = parse(self._run("dumpsys", "battery"), "", "", "").battery_temp_c
            if temperature is None or temperature < self.params.max_battery_temp_c:
                return temperature
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"battery still at {temperature:.1f} °C after {self.params.cool_wait_s:g} s "
                    f"(limit {self.params.max_battery_temp_c:g} °C)"
                )
            time.sleep(5)

    async def run_iteration(self, index: int) -> dict[str, float]:
        p = self.params
        await asyncio.to_thread(self._stop_app)
        self.markers.clear()  # marks of earlier launches are not this one's
        collector = LaunchCollector(p.app or None)
        await asyncio.to_thread(self._start_app)
        try:
            async with asyncio.timeout(p.iteration_timeout_s):
                done = await self._launched(collector)
        except TimeoutError:
            raise TestFailure(
                f"no complete launch of {p.package} within {p.iteration_timeout_s:g} s"
            ) from None
        await asyncio.sleep(p.settle_s)
        return {**done.metrics, **await asyncio.to_thread(self._memory)}

    async def _launched(self, collector: LaunchCollector) -> Iteration:
        """The launch's iteration: Raptor's at fullyLoaded; a native app's at its "Displayed"
        line, plus "Fully drawn" when the app reports it within FULLY_DRAWN_WAIT_S (the
        collector would otherwise hand it over only when the next launch opens)."""
        while True:
            done = collector.feed(await self.markers.next_line())
            if done is not None and done.complete:
                return done
            shown = collector.current
            if shown is not None and shown.complete:  # Displayed: complete, maybe not final
                try:
                    async with asyncio.timeout(FULLY_DRAWN_WAIT_S):
                        while (drawn := collector.feed(await self.markers.next_line())) is None:
                            pass
                        return drawn
                except TimeoutError:
                    collector.current = None
                    return shown

    def _stop_app(self) -> None:
        self._run("am", "force-stop", self.params.package)
        if self.params.drop_caches:
            self._run("su", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches")

    def _start_app(self) -> None:
        p = self.params
        if p.activity:
            self._run("am", "start", "-W", "-n", f"{p.package}/{p.activity}")
        else:
            self._run("monkey", "-p", p.package, "-c", "android.intent.category.LAUNCHER", "1")

    def _memory(self) -> dict[str, float]:
        """rss, pss and uss in MB from `dumpsys meminfo` at fullyLoaded."""
        text = self._run("dumpsys", "meminfo", self.params.package)
        values: dict[str, float] = {}
        for name, pattern in (("pss", r"TOTAL PSS:\s+(\d+)"), ("rss", r"TOTAL RSS:\s+(\d+)")):
            if match := re.search(pattern, text):
                values[f"coldlaunch.{name}"] = int(match.group(1)) / 1024
        # USS: the private dirty and clean columns of the TOTAL row.
        if match := re.search(r"^\s*TOTAL\s+\d+\s+(\d+)\s+(\d+)", text, re.MULTILINE):
            values["coldlaunch.uss"] = (int(match.group(1)) + int(match.group(2))) / 1024
        return values

    async def teardown(self) -> None:
        await self.markers.close()
        await asyncio.to_thread(self.shell.close)

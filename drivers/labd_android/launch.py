"""The app cold-launch scenario (Raptor's, in Mozilla's Firefox OS lab): per iteration
force-stop, optionally drop caches, launch through the launcher intent, collect the marks from
logcat, memory at fullyLoaded."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, ClassVar

import structlog
from pydantic import BaseModel, ConfigDict, Field

from labd.markers import Iteration, LaunchCollector
from labd.sdk import (
    CannotStart,
    InfrastructureError,
    MarkerStream,
    MetricSpec,
    Scenario,
    TestFailure,
)
from labd_android.health import parse
from labd_android.names import Activity, Package
from labd_android.shell import PersistentShell

log = structlog.get_logger("labd.android")

# Rooted devices only: the vendor's thermal daemon off, every core at its top frequency.
LOCK_CLOCKS = (
    "stop thermal-engine; "
    "for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > $g; done"
)
GOVERNORS = (  # each core's governor file and its governor, one per line, before the lock
    'for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo "$g $(cat $g)"; done'
)
GOVERNOR_LINE = re.compile(
    r"(/sys/devices/system/cpu/cpu\d+/cpufreq/scaling_governor) ([a-z0-9_]+)"
)
ANIMATION_SCALES = (
    "window_animation_scale",
    "transition_animation_scale",
    "animator_duration_scale",
)
# The battery the lab runs its phones at: a job may ask for a cooler one, and a phone that
# does not cool to a job's own stricter limit has not failed (the job's limit was not met).
LAB_BATTERY_LIMIT_C = 40
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
    max_battery_temp_c: float = Field(
        LAB_BATTERY_LIMIT_C,
        ge=20,
        le=60,
        description="Wait until the battery is cooler than this (a phone at rest: 25-35).",
    )
    cool_wait_s: float = Field(
        300, ge=0, le=3600, description="Longest wait for cooling; then the job fails."
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
        self.undo: list[list[str]] = []  # commands that put the phone back, in reverse order
        if self.params.airplane_mode and self.ctx.device.capabilities.get("transport") == "tcp":
            raise CannotStart(
                f"airplane_mode would cut {self.ctx.device.id} off: it is attached over adb "
                "TCP (its Wi-Fi), and could not be put back; run it on a phone on USB"
            )
        self.ctx.fingerprint["stabilisation"] = await asyncio.to_thread(self._stabilise)
        await self.markers.open()

    def _stabilise(self) -> dict[str, Any]:
        """Each step applied, in the order applied: what the numbers were measured under.
        Each is undone at teardown: the phone's next job (and a phone attached over adb TCP,
        which airplane mode cuts off) finds it as it was."""
        p = self.params
        steps: dict[str, Any] = {}
        self.undo.append(self._put_back("stay_on_while_plugged_in"))
        self._run("svc", "power", "stayon", "true")
        steps["stay_awake"] = True
        for scale in ANIMATION_SCALES:
            self.undo.append(self._put_back(scale))
            self._run("settings", "put", "global", scale, "0")
        steps["animations"] = "off"
        if p.airplane_mode:
            if self._setting("airplane_mode_on") != "1":
                self.undo.append(["cmd", "connectivity", "airplane-mode", "disable"])
            self._run("cmd", "connectivity", "airplane-mode", "enable")
            steps["airplane_mode"] = True
        self._run("am", "kill-all")
        steps["background_apps"] = "stopped"
        rooted = self.shell.run(["su", "-c", "id"])[1] == 0
        if rooted:
            governors = GOVERNOR_LINE.findall(self._run("su", "-c", GOVERNORS))
            restore = [f"echo {governor} > {path}" for path, governor in governors]
            if self.shell.run(["getprop", "init.svc.thermal-engine"])[0].strip() == "running":
                restore.append("start thermal-engine")  # not one the phone did not run
            if restore:
                self.undo.append(["su", "-c", "; ".join(restore)])
            self._run("su", "-c", LOCK_CLOCKS)
        steps["cpu_clocks"] = "locked (performance governor)" if rooted else "not locked (no root)"
        steps["battery_temp_c"] = self._wait_cool()
        return steps

    def _setting(self, name: str) -> str | None:
        """A global setting's value; None where it is not set (Android says null)."""
        output, status = self.shell.run(["settings", "get", "global", name])
        value = output.strip()
        return None if status != 0 or value in ("", "null") else value

    def _put_back(self, name: str) -> list[str]:
        """The command that sets global setting `name` back to what it is now."""
        value = self._setting(name)
        if value is None:
            return ["settings", "delete", "global", name]
        return ["settings", "put", "global", name, value]

    def _wait_cool(self) -> float | None:
        limit = self.params.max_battery_temp_c
        deadline = time.monotonic() + self.params.cool_wait_s
        while True:
            temperature = parse(self._run("dumpsys", "battery"), "", "", "").battery_temp_c
            if temperature is None or temperature < limit:
                return temperature
            if time.monotonic() > deadline:
                said = f"battery still at {temperature:.1f} °C after {self.params.cool_wait_s:g} s"
                if limit < LAB_BATTERY_LIMIT_C:  # the job's own limit: not the phone's fault
                    raise TestFailure(
                        f"{said}, above this job's max_battery_temp_c of {limit:g} °C (the lab "
                        f"runs phones under {LAB_BATTERY_LIMIT_C} °C): raise it or cool_wait_s"
                    )
                raise InfrastructureError(f"{said} (limit {limit:g} °C)")
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
        self.ctx.notes += done.problems  # marks left out, each with why
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
        if missing := [m for m in ("rss", "pss", "uss") if f"coldlaunch.{m}" not in values]:
            self.ctx.notes.append(
                f"dumpsys meminfo {self.params.package} gave no {', '.join(missing)}: left out "
                f"(it said {text.strip()[:120]!r})"
            )
        return values

    async def teardown(self) -> None:
        await self.markers.close()
        await asyncio.to_thread(self._put_phone_back)
        await asyncio.to_thread(self.shell.close)

    def _put_phone_back(self) -> None:
        """Undo the stabilisation, last step first, each tried whatever the one before did (a
        blip would leave the rest undone); a phone gone meanwhile is left as it is (the job's
        own outcome says what happened to it)."""
        for argv in reversed(getattr(self, "undo", [])):
            try:
                output, status = self.shell.run(argv)
            except InfrastructureError as e:
                log.warning("phone setting not restored", step=argv[:4], error=str(e))
                continue
            if status != 0:
                log.warning("phone setting not restored", step=argv[:4], output=output[:200])

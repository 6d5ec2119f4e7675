"""The Android driver against the adb stand-in (tests/adb_standin.py): the real adb host
protocol on a local port, scripted devices behind it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from labd.errors import CannotStart, InfrastructureError, TestFailure, UsageError
from labd.sdk import RunContext
from labd_android import AndroidDriver, AndroidOptions, PersistentShell, Touch
from labd_android.input import AndroidInput
from tests.adb_standin import AdbStandIn, FakeDevice
from tests.markers_log import OFFSETS, threadtime_iteration

BATTERY = """Current Battery Service state:
  AC powered: false
  USB powered: true
  Wireless powered: false
  status: 2
  level: 87
  temperature: 312
"""
THERMAL = "IsStatusOverride: false\nThermal Status: 0\n"
DF = "Filesystem      1K-blocks    Used Available Use% Mounted on\n/dev/block/dm-5 115234232 20000000 95234232  18% /data\n"
POWER = "Power Manager State:\n  mWakefulness=Awake\n"
MEMINFO = """** MEMINFO in pid 7001 [org.mozilla.clock] **
                   Pss  Private  Private     Swap      Rss
                 Total    Dirty    Clean    Dirty    Total
                ------   ------   ------   ------   ------
         TOTAL    52071    40960     2048        0   134512

 App Summary
           TOTAL PSS:    52071            TOTAL RSS:   134512       TOTAL SWAP PSS:        0
"""


def phone(serial: str = "emulator-5554", **outputs: str) -> FakeDevice:
    return FakeDevice(
        serial,
        props={
            "ro.product.model": "Pixel 7",
            "ro.build.version.release": "14",
            "ro.build.version.sdk": "34",
        },
        outputs={
            "dumpsys battery": BATTERY,
            "dumpsys thermalservice": THERMAL,
            "df /data": DF,
            "dumpsys power": POWER,
            "dumpsys meminfo": MEMINFO,
            **outputs,
        },
    )


@pytest.fixture
def adb() -> Iterator[AdbStandIn]:
    server = AdbStandIn()
    yield server
    server.close()


def driver_for(adb: AdbStandIn) -> AndroidDriver:
    return AndroidDriver(AndroidOptions(adb_port=adb.port), "h1")


async def test_discovery_follows_plugging_and_reads_the_device(adb: AdbStandIn) -> None:
    driver = driver_for(adb)
    assert await driver.discover() == []
    adb.add(phone())
    adb.add(phone("192.168.1.20:5555"))
    devices = await driver.discover()
    assert [(d.id, d.model, d.os_version, d.capabilities["transport"]) for d in devices] == [
        ("emulator-5554", "Pixel 7", "14", "usb"), ("192.168.1.20:5555", "Pixel 7", "14", "tcp"),
    ]  # fmt: skip
    adb.remove("emulator-5554")
    assert [d.id for d in await driver.discover()] == ["192.168.1.20:5555"]


async def test_health_battery_thermal_storage_screen(adb: AdbStandIn) -> None:
    device = adb.add(phone())
    driver = driver_for(adb)
    (found,) = await driver.discover()
    health = await asyncio.to_thread(driver.state, found.id)
    assert health.as_dict() == {"battery_level": 87, "charging": True, "battery_temp_c": 31.2,
                                "thermal_status": 0, "free_storage_mb": pytest.approx(93002.2, abs=0.1),
                                "screen_on": True}  # fmt: skip
    assert await driver.health(found) is None
    device.outputs["dumpsys thermalservice"] = "Thermal Status: 3\n"
    assert await driver.health(found) == "thermal status severe: throttling"
    device.outputs["dumpsys thermalservice"] = THERMAL
    device.outputs["dumpsys battery"] = BATTERY.replace(
        "USB powered: true", "USB powered: false"
    ).replace("level: 87", "level: 9")
    assert await driver.health(found) == "battery at 9% and not charging (minimum 20%)"
    adb.remove(found.id)
    assert "not found" in (await driver.health(found) or "")


async def test_health_a_phone_does_not_report_is_said_not_counted_healthy_in_silence(
    adb: AdbStandIn,
) -> None:
    """A phone whose `dumpsys battery` and `thermalservice` give no figure passed every health
    check without a word: it stays in the lab (an unreadable figure is no fault of the
    phone's), and a warning names what was not checked, once while it stays so."""
    device = adb.add(
        phone(**{"dumpsys battery": "", "dumpsys thermalservice": "Can't find service\n"})
    )
    driver = driver_for(adb)
    (found,) = await driver.discover()
    with capture_logs() as logs:
        assert await driver.health(found) is None
        assert await driver.health(found) is None
        device.outputs["dumpsys battery"] = BATTERY
        assert await driver.health(found) is None
    said = [e for e in logs if e["event"] == "health not fully checked"]
    assert [e["unread"] for e in said] == ["battery level, thermal status", "thermal status"]
    assert said[0]["log_level"] == "warning" and "emulator-5554" in said[0]["device"]


def typed_by_android(argument: str) -> str:
    """What `input text` types for its argument: Android's InputShellCommand reads "%s" as a
    space, scanning left to right ("%%s" is "%" then a space)."""
    out, escaped = [], False
    for char in argument:
        if escaped and char == "s":
            out[-1] = " "
            escaped = False
            continue
        escaped = char == "%"
        out.append(char)
    return "".join(out)


KEYS_TYPED = {"66": "\n", "61": "\t", "67": "\b", "111": "\x1b"}


def test_typed_text_arrives_exactly_and_never_meets_a_shell_unquoted(adb: AdbStandIn) -> None:
    device = adb.add(phone())
    driver = AndroidDriver(AndroidOptions(adb_port=adb.port), "h1")
    shell = PersistentShell(driver.adb_device(device.serial))
    keys = AndroidInput(shell)
    nasty = (
        "; rm -rf / `id` $(id) 'q' \"d\" \\ | & > < ünïcødé 🙂\nnext line\t100%sure %s "
        "%%s % s%\bend\x1b"
    )
    keys.text(nasty)
    commands = device.received[1:]  # after the probe for `cmd input`
    typed = []
    for argv in commands:
        assert argv[:2] == ["cmd", "input"]  # the shell split it into these words, no more
        if argv[2] == "text":
            assert len(argv) == 4
            typed.append(typed_by_android(argv[3]))
        else:
            assert argv[2] == "keyevent" and len(argv) == 4
            typed.append(KEYS_TYPED[argv[3]])
    assert "".join(typed) == nasty


def test_keys_and_points_the_phone_cannot_take_are_refused_before_anything_is_sent(
    adb: AdbStandIn,
) -> None:
    device = adb.add(phone())
    keys = AndroidInput(PersistentShell(driver_for(adb).adb_device(device.serial)))
    for name, code in [("Page_Down", "93"), ("page-up", "92"), ("4", "4"),
                       ("keycode_volume_up", "KEYCODE_VOLUME_UP"), ("BACK", "4")]:  # fmt: skip
        keys.key(name)
        assert device.received[-1] == ["cmd", "input", "keyevent", code]
    sent = len(device.received)
    refused = [
        (lambda: keys.key("KEYCODE_BACK;id"), "key 'KEYCODE_BACK;id': expected a key name"),
        (lambda: keys.key("0"), "key '0'"),
        (lambda: keys.key("F13"), "key 'F13'"),
        (lambda: keys.key("9" * 5000), f"key '{'9' * 60}'...: expected"),  # no int() of it
        (lambda: keys.tap(-5, 10), "x=-5: expected a whole number of pixels"),
        (lambda: keys.tap(10, 1.5), "y=1.5"),  # type: ignore[arg-type]
        (lambda: keys.tap(True, 10), "x=True"),
        (lambda: keys.tap(10**12, 10), "x=1000000000000"),
        (lambda: keys.swipe(0, 0, 10, 10, -1), "duration_ms=-1"),
        (lambda: keys.swipe(0, 0, 10, 10, 60_001), "duration_ms=60001: expected a finite number"),
        (lambda: keys.text("a" * 10_001), "text of 10001 characters: at most 10000"),
        (lambda: keys.text("a\x00b"), "text: '\\x00' at position 1 cannot be typed"),
    ]
    for call, message in refused:
        with pytest.raises(UsageError, match=re.escape(message)):
            call()
    assert len(device.received) == sent


def test_taps_swipes_keys_and_gestures_take_one_shell(adb: AdbStandIn) -> None:
    device = adb.add(phone())
    driver = driver_for(adb)
    keys = AndroidInput(PersistentShell(driver.adb_device(device.serial)))
    keys.tap(10, 20)
    keys.long_press(5, 5)
    keys.key("back")
    keys.gesture([Touch(0, 100, 100, 100, 100), Touch(50, 100, 800, 100, 200, 150)])
    assert device.received[1:] == [
        ["cmd", "input", "tap", "10", "20"],
        ["cmd", "input", "swipe", "5", "5", "5", "5", "800"],
        ["cmd", "input", "keyevent", "4"],
        ["cmd", "input", "tap", "100", "100"],
        ["cmd", "input", "swipe", "100", "800", "100", "200", "150"],
    ]
    assert len(keys.latencies_ms) == 5


def test_a_vanished_device_and_an_adb_server_restart(adb: AdbStandIn) -> None:
    device = adb.add(phone())
    driver = driver_for(adb)
    shell = PersistentShell(driver.adb_device(device.serial))
    assert shell.run(["getprop", "ro.product.model"]) == ("Pixel 7\n", 0)
    adb.remove(device.serial)  # unplugged
    with pytest.raises(InfrastructureError, match="emulator-5554"):
        shell.run(["getprop", "ro.product.model"])
    adb.add(device)  # back, as after an adb server restart: the shell reopens by itself
    assert shell.run(["getprop", "ro.product.model"]) == ("Pixel 7\n", 0)


def test_a_long_answer_arrives_whole_and_an_endless_one_is_cut(adb: AdbStandIn) -> None:
    """A command's output is read in linear time and held up to 16 MiB: a device that sends
    more fails that command, saying so, and the next one gets its own answer."""
    line = "x" * 1023 + "\n"
    device = adb.add(phone(**{"dumpsys meminfo": line * 4096, "cat /dev/zero": line * 17000}))
    shell = PersistentShell(driver_for(adb).adb_device(device.serial))
    assert shell.run(["dumpsys", "meminfo"]) == (line * 4096, 0)
    with pytest.raises(InfrastructureError, match=r"'cat /dev/zero': answered more than 16 MiB"):
        shell.run(["cat", "/dev/zero"])
    assert shell.run(["getprop", "ro.product.model"]) == ("Pixel 7\n", 0)


async def test_expose_port_is_adb_reverse(adb: AdbStandIn) -> None:
    device = adb.add(phone())
    driver = driver_for(adb)
    (found,) = await driver.discover()
    assert await driver.expose_port(found, "127.0.0.1", 8123) == "127.0.0.1:8123"
    assert device.reverses == ["tcp:8123;tcp:8123"]


async def test_app_cold_launch_collects_the_marks_and_memory(
    adb: AdbStandIn, tmp_path: Path
) -> None:
    epochs = iter(range(1_434_771_804_212, 1_434_771_904_212, 10_000))

    def launcher(device: FakeDevice, argv: list[str]) -> None:
        if argv[0] == "monkey":  # the app starts and logs its marks
            device.emit(*threadtime_iteration(next(epochs)))

    device = adb.add(phone())
    device.on_command = launcher
    driver = driver_for(adb)
    (found,) = await driver.discover()
    scenario_cls = driver.scenarios()["app-launch"]
    params = scenario_cls.Params.model_validate(
        {"package": "org.mozilla.clock", "app": "clock.gaiamobile.org", "settle_s": 0}
    )
    ctx = RunContext("job", 1, found, tmp_path, resources=driver.resources(found))
    scenario = scenario_cls(params, ctx)
    await scenario.setup()
    try:
        values = [await scenario.run_iteration(i) for i in range(3)]
        assert ctx.notes == []
        device.outputs["dumpsys meminfo"] = "No process found for: org.mozilla.clock\n"
        without_memory = await scenario.run_iteration(3)
    finally:
        await scenario.teardown()
    # Memory the phone did not report is noted, not silently missing (a tester's find).
    assert not any(k.startswith("coldlaunch.") and k[11:] in ("rss", "pss", "uss")
                   for k in without_memory)  # fmt: skip
    assert ctx.notes == [
        "dumpsys meminfo org.mozilla.clock gave no rss, pss, uss: left out (it said 'No process "
        "found for: org.mozilla.clock')"
    ]
    for v in values:
        marks = {k: x for k, x in v.items() if k.removeprefix("coldlaunch.") in OFFSETS}
        assert marks == {f"coldlaunch.{k}": float(o) for k, o in OFFSETS.items()}
        assert v["coldlaunch.pss"] == pytest.approx(52071 / 1024)
        assert v["coldlaunch.uss"] == pytest.approx((40960 + 2048) / 1024)
    stabilisation = ctx.fingerprint["stabilisation"]
    assert stabilisation["animations"] == "off" and stabilisation["battery_temp_c"] == 31.2
    assert ["am", "force-stop", "org.mozilla.clock"] in device.received
    assert ["settings", "put", "global", "window_animation_scale", "0"] in device.received


async def test_conditions_are_thermal_status_battery_and_cpufreq(adb: AdbStandIn) -> None:
    from labd_android.health import CPUFREQ

    device = adb.add(phone())
    device.outputs[f"sh -c {CPUFREQ}"] = (
        "/sys/devices/system/cpu/cpu0/cpufreq 1804800 schedutil\n"
        "/sys/devices/system/cpu/cpu4/cpufreq 2419200 schedutil\n"
    )
    device.outputs["dumpsys thermalservice"] = "Thermal Status: 2\n"
    driver = driver_for(adb)
    (found,) = await driver.discover()
    assert await driver.conditions(found) == {
        "thermal_status": 2,
        "battery_temp_c": 31.2,
        "cpu_mhz": [1804, 2419],
        "governor": "schedutil",
    }
    assert ["sh", "-c", CPUFREQ] in device.received  # a fixed script, quoted whole


async def test_a_native_app_launch_completes_at_displayed_or_fully_drawn(
    adb: AdbStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No Raptor marks: ActivityManager's lines are the launch (Fully drawn when reported)."""
    monkeypatch.setattr("labd_android.launch.FULLY_DRAWN_WAIT_S", 0.3)
    reports = iter([True, False])

    def launcher(device: FakeDevice, argv: list[str]) -> None:
        if argv[:2] == ["am", "start"]:
            stamp = "06-19 20:43:25.380  873  900 I ActivityTaskManager: "
            lines = [stamp + "Displayed com.example.app/.Main: +1s234ms"]
            if next(reports):
                lines.append(stamp + "Fully drawn com.example.app/.Main: +1s900ms")
            device.emit(*lines)

    device = adb.add(phone())
    device.on_command = launcher
    driver = driver_for(adb)
    (found,) = await driver.discover()
    scenario_cls = driver.scenarios()["app-launch"]
    params = scenario_cls.Params.model_validate(
        {"package": "com.example.app", "activity": ".Main", "settle_s": 0,
         "iteration_timeout_s": 10}
    )  # fmt: skip
    ctx = RunContext("job", 1, found, tmp_path, resources=driver.resources(found))
    scenario = scenario_cls(params, ctx)
    await scenario.setup()
    try:
        drawn, shown = [await scenario.run_iteration(i) for i in range(2)]
    finally:
        await scenario.teardown()
    assert drawn["coldlaunch.displayed"] == 1234 and drawn["coldlaunch.fullyDrawn"] == 1900
    assert shown["coldlaunch.displayed"] == 1234 and "coldlaunch.fullyDrawn" not in shown


class SettledPhone(FakeDevice):
    """A rooted phone that keeps its global settings, airplane mode and CPU governors."""

    def __init__(self, serial: str = "emulator-5554") -> None:
        base = phone(serial)
        props = {**base.props, "init.svc.thermal-engine": "running"}
        super().__init__(base.serial, props=props, outputs=base.outputs)
        self.statuses = {}  # rooted: `su` answers
        self.settings = {"stay_on_while_plugged_in": "0", "window_animation_scale": "1.0"}
        self.governors = {0: "schedutil", 1: "powersave"}
        self.thermal_engine = True

    def answer(self, argv: list[str]) -> tuple[str, int] | None:
        if argv[:3] == ["settings", "get", "global"]:
            return self.settings.get(argv[3], "null") + "\n", 0
        if argv[:3] == ["settings", "put", "global"]:
            self.settings[argv[3]] = argv[4]
            return "", 0
        if argv[:3] == ["settings", "delete", "global"]:
            self.settings.pop(argv[3], None)
            return "", 0
        if argv[:3] == ["svc", "power", "stayon"]:
            self.settings["stay_on_while_plugged_in"] = "7" if argv[3] == "true" else "0"
            return "", 0
        if argv[:3] == ["cmd", "connectivity", "airplane-mode"]:
            self.settings["airplane_mode_on"] = "1" if argv[3] == "enable" else "0"
            return "", 0
        if argv[:2] == ["su", "-c"]:
            return self._root(argv[2]), 0
        return None

    def _root(self, script: str) -> str:
        path = "/sys/devices/system/cpu/cpu{}/cpufreq/scaling_governor"
        if script.startswith("for g in") and "cat $g" in script:
            return "".join(f"{path.format(n)} {g}\n" for n, g in self.governors.items())
        if script.startswith("stop thermal-engine"):
            self.thermal_engine = False
            self.governors = dict.fromkeys(self.governors, "performance")
        for governor, cpu in re.findall(r"echo (\w+) > /sys/devices/system/cpu/cpu(\d+)/", script):
            self.governors[int(cpu)] = governor
        if "start thermal-engine" in script:
            self.thermal_engine = True
        return "uid=0(root)\n"


async def test_app_launch_puts_the_phone_back_as_it_found_it(
    adb: AdbStandIn, tmp_path: Path
) -> None:
    """A tester's phone stayed in airplane mode after a job (one attached over adb TCP drops
    out of the lab), awake, without animations, its clocks locked and its thermal daemon
    stopped: every step of the stabilisation is now undone at teardown."""
    device = adb.add(SettledPhone())
    before = (dict(device.settings), dict(device.governors))
    driver = driver_for(adb)
    (found,) = await driver.discover()
    scenario_cls = driver.scenarios()["app-launch"]
    params = scenario_cls.Params.model_validate(
        {"package": "org.mozilla.clock", "airplane_mode": True, "cool_wait_s": 0}
    )
    ctx = RunContext("job", 1, found, tmp_path, resources=driver.resources(found))
    scenario = scenario_cls(params, ctx)
    await scenario.setup()
    during = (dict(device.settings), dict(device.governors), device.thermal_engine)
    await scenario.teardown()
    assert during == (
        {
            "stay_on_while_plugged_in": "7",
            "window_animation_scale": "0",
            "transition_animation_scale": "0",
            "animator_duration_scale": "0",
            "airplane_mode_on": "1",
        },
        {0: "performance", 1: "performance"},
        False,
    )
    settings, governors = before
    assert (device.settings, device.governors) == ({**settings, "airplane_mode_on": "0"}, governors)
    assert device.thermal_engine


async def test_airplane_mode_is_refused_for_a_phone_on_adb_tcp(
    adb: AdbStandIn, tmp_path: Path
) -> None:
    """Airplane mode cuts a phone attached over adb TCP (its Wi-Fi) out of the lab, and
    teardown cannot reach it to turn it off: such a job cannot start there (no blame)."""
    device = adb.add(SettledPhone("192.168.1.20:5555"))
    driver = driver_for(adb)
    (found,) = await driver.discover()
    scenario_cls = driver.scenarios()["app-launch"]
    params = scenario_cls.Params.model_validate({"package": "a.b", "airplane_mode": True})
    ctx = RunContext("job", 1, found, tmp_path, resources=driver.resources(found))
    with pytest.raises(CannotStart, match=r"airplane_mode would cut 192\.168\.1\.20:5555 off"):
        await scenario_cls(params, ctx).setup()
    assert "airplane_mode_on" not in device.settings


async def test_a_phone_that_does_not_cool_to_a_jobs_own_limit_is_not_blamed(
    adb: AdbStandIn, tmp_path: Path
) -> None:
    """A tester's max_battery_temp_c = -1000 quarantined every phone of the lab: each attempt
    was an infrastructure failure. A limit out of the physical range is refused at submit; a
    phone that does not cool under a job's own limit, stricter than the lab's 40 °C, fails
    the job, not the phone; one that stays over 40 °C is still the phone's failure."""
    scenario_cls = driver_for(adb).scenarios()["app-launch"]
    with pytest.raises(ValueError, match="max_battery_temp_c"):
        scenario_cls.Params.model_validate({"package": "a.b", "max_battery_temp_c": -1000})
    for limit, temperature, error in ((25, 312, TestFailure), (40, 452, InfrastructureError)):
        adb.devices.clear()
        adb.add(phone(**{"dumpsys battery": BATTERY.replace("312", str(temperature))}))
        driver = driver_for(adb)
        (found,) = await driver.discover()
        params = scenario_cls.Params.model_validate(
            {"package": "a.b", "max_battery_temp_c": limit, "cool_wait_s": 0}
        )
        ctx = RunContext("job", 1, found, tmp_path, resources=driver.resources(found))
        scenario = scenario_cls(params, ctx)
        with pytest.raises(error, match=f"battery still at {temperature / 10:.1f} °C"):
            await scenario.setup()
        await scenario.teardown()

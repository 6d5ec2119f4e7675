"""The Android driver against adb servers and phones that misbehave (tests/adb_standin.py: the
real adb protocol, a broken server or device behind it): each costs one device or one
round, named in the error, never the daemon's threads or the other phones."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from labd.errors import InfrastructureError
from labd.sdk import Device, RunContext
from labd_android import AndroidDriver, AndroidOptions, PersistentShell
from labd_android.logcat import MAX_LINE
from tests.adb_standin import AdbStandIn, FakeDevice
from tests.integration.drivers.test_android import phone


@pytest.fixture
def adb(monkeypatch: pytest.MonkeyPatch) -> Iterator[AdbStandIn]:
    monkeypatch.setattr("labd_android.adb.ADB_TIMEOUT_S", 0.5)  # a hang is found in 0.5 s
    server = AdbStandIn()
    yield server
    server.close()


def driver_for(adb: AdbStandIn) -> AndroidDriver:
    return AndroidDriver(AndroidOptions(adb_port=adb.port), "h1")


async def test_a_silent_adb_server_fails_discovery_in_time_naming_it(adb: AdbStandIn) -> None:
    adb.garbled = b""  # accepts, never answers
    async with asyncio.timeout(5):
        with pytest.raises(InfrastructureError) as caught:
            await driver_for(adb).discover()
    assert str(caught.value) == f"adb server 127.0.0.1:{adb.port}: no answer within 0.5 s"


async def test_a_garbled_adb_server_is_named_with_what_it_sent(adb: AdbStandIn) -> None:
    adb.add(phone())
    driver = driver_for(adb)
    (found,) = await driver.discover()
    adb.garbled = b"OKAYzzzz"
    with pytest.raises(InfrastructureError, match=f"adb server 127.0.0.1:{adb.port}: garbled"):
        await driver.discover()
    reason = await driver.health(found)
    assert reason is not None and reason.startswith(
        f"adb server 127.0.0.1:{adb.port}: device emulator-5554: garbled answer ("
    )
    assert "'zzzz'" in reason


async def test_a_hung_phone_holds_one_thread_not_one_per_round(adb: AdbStandIn) -> None:
    released = threading.Event()

    class Hung(FakeDevice):
        def answer(self, argv: list[str]) -> tuple[str, int] | None:
            if argv[:2] == ["dumpsys", "battery"]:
                released.wait(30)  # a hung adbd
            return None

    hung = adb.add(Hung("hung-1", outputs=phone().outputs))
    driver = driver_for(adb)
    (found,) = await driver.discover()
    try:
        for _ in range(5):  # pool rounds, each giving up before the phone answers
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await driver.health(found)
        with pytest.raises(InfrastructureError) as caught:
            await driver.health(found)  # joins the round still running: its own error
    finally:
        released.set()
    assert str(caught.value) == "device hung-1: dumpsys battery: no answer within 0.5 s"
    assert hung.received.count(["dumpsys", "battery"]) == 1
    await driver.close()


async def test_a_device_list_cut_short_fails_discovery_not_every_phone(adb: AdbStandIn) -> None:
    """A server that promised 256 bytes of list and hung up after 18 had every phone past the
    cut taken for unplugged (adbutils read the part as the whole)."""
    adb.add(phone())
    driver = driver_for(adb)
    await driver.discover()
    adb.garbled, adb.hangs_up = b"OKAY0100emulator-5554\tdevi", True
    with pytest.raises(InfrastructureError) as caught:
        await driver.discover()
    assert str(caught.value) == (
        f"adb server 127.0.0.1:{adb.port}: the answer ended after 18 of 256 bytes"
    )


async def test_a_serial_labd_cannot_use_skips_that_device_only(adb: AdbStandIn) -> None:
    """A serial holding a space was read as the serial's first word in the state of its
    second, and an empty one left out without a word."""
    adb.add(phone())
    bad = ["evil;id", "x" * 200, "ünï", "-n", "has space", ""]
    for serial in bad:
        adb.add(FakeDevice(serial))
    driver = driver_for(adb)
    with structlog.testing.capture_logs() as logs:
        assert [d.id for d in await driver.discover()] == ["emulator-5554"]
        adb.add(phone("emulator-5556"))
        assert [d.id for d in await driver.discover()] == ["emulator-5554", "emulator-5556"]
    problems = [e["problem"] for e in logs if e["event"] == "device skipped"]
    assert len(problems) == len(bad)  # once each, not every round
    assert problems[0].startswith("serial 'evil;id' is outside labd's device-id grammar ^")
    assert f"serial '{'x' * 60}'..." in problems[1]
    assert r"serial '\xfcn\xef'" in problems[2]
    assert problems[4].startswith("serial 'has space' is outside")
    assert problems[5].startswith("serial '' is outside")


async def test_a_phone_adb_lists_but_cannot_use_yet_is_said_once_with_what_to_do(
    adb: AdbStandIn,
) -> None:
    """A phone that has not accepted this computer's key was missing from the lab without a
    word; it is said once while it waits, and joins once authorised."""
    adb.add(phone())
    waiting = adb.add(phone("R58M123ABC"))
    waiting.state = "unauthorized"
    driver = driver_for(adb)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert [d.id for d in await driver.discover()] == ["emulator-5554"]
        # What `labd devices list` says of it, where it said "vanished" (a tester's find).
        assert driver.why_absent("R58M123ABC") == (
            "adb state unauthorized: accept this computer's key on the phone (the USB "
            "debugging prompt)"
        )
        assert driver.why_absent("emulator-5554") is None
        # What the pool lists it by before it was ever ready: offline, with what to do.
        assert driver.waiting() == {"R58M123ABC": driver.why_absent("R58M123ABC")}
        waiting.state = "device"
        assert [d.id for d in await driver.discover()] == ["emulator-5554", "R58M123ABC"]
    (said,) = [e for e in logs if e["event"] == "device not ready"]
    assert (said["device"], said["adb_state"]) == ("'R58M123ABC'", "unauthorized")
    assert said["hint"] == "accept this computer's key on the phone (the USB debugging prompt)"


def test_a_garbled_exit_status_names_the_device_and_what_came(adb: AdbStandIn) -> None:
    class Garbling(FakeDevice):
        def run(self, line: str) -> str:
            return re.sub(r"(__labd_\d+_)\d+", r"\1garbage", super().run(line))

    device = adb.add(Garbling("emulator-5554"))
    shell = PersistentShell(driver_for(adb).adb_device(device.serial))
    with pytest.raises(InfrastructureError) as caught:
        shell.run(["getprop", "ro.product.model"])
    assert str(caught.value) == (
        "device emulator-5554: 'getprop ro.product.model': the shell answered "
        "'__labd_0_garbage', not an exit status"
    )


def test_an_exit_status_split_across_reads_is_read_whole(adb: AdbStandIn) -> None:
    class Halting(FakeDevice):
        def send(self, conn: socket.socket, answer: str) -> None:
            conn.sendall(answer[:-2].encode())  # the status's last digit a moment later
            time.sleep(0.05)
            conn.sendall(answer[-2:].encode())

    device = adb.add(Halting("emulator-5554", statuses={"false": 127}))
    shell = PersistentShell(driver_for(adb).adb_device(device.serial))
    assert shell.run(["false"]) == ("", 127)
    assert shell.run(["true"]) == ("", 0)


def test_an_endless_log_line_is_dropped_counted_and_the_next_one_comes(
    adb: AdbStandIn,
) -> None:
    mark = "I/PerformanceTiming( 1): Performance Entry: a|mark|appLaunch|0|0|1"

    class Flooding(FakeDevice):
        def stream(self, command: str, conn: socket.socket) -> bool:
            if not command.startswith("logcat"):
                return False
            for _ in range(8 * 16):  # 8 MB without a newline
                conn.sendall(b"A" * 65536)
            conn.sendall(f"\n{mark}\n".encode())
            return True

    adb.add(Flooding("emulator-5554"))
    driver = driver_for(adb)
    logcat = driver.logcat(Device(id="emulator-5554", driver="android", platform="android"))
    with structlog.testing.capture_logs() as logs:
        assert list(logcat.read_lines()) == [mark]
    assert logcat.lines.too_long == 1
    assert [e["limit"] for e in logs if e["event"] == "a log line too long: dropped"] == [MAX_LINE]


async def test_a_phone_unplugged_mid_launch_tears_down_quietly(
    adb: AdbStandIn, tmp_path: Path
) -> None:
    device = adb.add(phone())
    driver = driver_for(adb)
    (found,) = await driver.discover()
    scenario_cls = driver.scenarios()["app-launch"]
    params = scenario_cls.Params.model_validate({"package": "org.mozilla.clock"})
    ctx = RunContext("job", 1, found, tmp_path, resources=driver.resources(found))
    scenario = scenario_cls(params, ctx)
    await scenario.setup()
    for _ in range(500):  # until the log streams
        if device.logcat_readers:
            break
        await asyncio.sleep(0.01)
    adb.remove(found.id)
    with pytest.raises(InfrastructureError, match="logcat of emulator-5554: ended"):
        await asyncio.wait_for(scenario.markers.next_line(), 5)
    await scenario.teardown()  # the log's stream ended and closed already: nothing to raise


async def test_a_phone_back_from_an_update_is_described_afresh(adb: AdbStandIn) -> None:
    updated = adb.add(phone())
    driver = driver_for(adb)
    assert [d.os_version for d in await driver.discover()] == ["14"]
    updated.state = "offline"  # rebooting into Android 15
    assert await driver.discover() == []
    updated.props["ro.build.version.release"] = "15"
    updated.state = "device"
    assert [d.os_version for d in await driver.discover()] == ["15"]

"""The pool's rules for a device's health, failures and admin state, on a store in memory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from labd.config import PoolSettings
from labd.events import DeviceChanged, DevicePowerCycled, EventBus, HealthCheckFailed
from labd.model import AdminState, Device, DeviceState
from labd.pool import Pool
from labd.pool.plugins import Plugins
from labd.sdk import POWER_GROUP, Registry
from tests.scripted_driver import RecordingPower, ScriptedDriver
from tests.unit.fakes import DeviceMemory


async def pool_of(*ids: str, power: dict[str, Any] | None = None, **settings: Any) -> Any:
    driver = ScriptedDriver(list(ids))
    store = DeviceMemory()
    bus = EventBus()
    heard = bus.subscribe("test")
    pool = Pool({"scripted": driver}, power or {}, store, bus, PoolSettings(**settings), "h")
    await pool.discover()  # what start() does first, without its background loops
    return pool, driver, store, heard


def drained(sub: Any) -> list[Any]:
    events = []
    while (event := sub.get_nowait()) is not None:
        events.append(event)
    return events


async def test_a_discovered_device_is_available_saved_and_announced() -> None:
    pool, _, store, heard = await pool_of("p1")
    assert [d.id for d in pool.available()] == ["p1"]
    assert store.devices["p1"].host == "h"
    (changed,) = drained(heard)
    assert isinstance(changed, DeviceChanged) and changed.state == "available"


async def test_a_failing_device_is_power_cycled_then_quarantined() -> None:
    relay = RecordingPower()
    pool, driver, _, heard = await pool_of(
        "p1", power={"p1": relay}, power_cycle_after=2, power_off_s=0
    )
    driver.unhealthy["p1"] = "adb offline"
    await pool.check_health()
    assert pool.devices["p1"].state is DeviceState.OFFLINE and relay.calls == []
    await pool.check_health()  # the second failure in a row: cycle the power
    assert relay.calls == ["off", "on"]
    await pool.check_health()  # cycling did not help
    device = pool.devices["p1"]
    assert device.state is DeviceState.QUARANTINED
    assert "power cycle did not help" in device.reason
    kinds = [type(e) for e in drained(heard)]
    assert kinds.count(HealthCheckFailed) == 3 and kinds.count(DevicePowerCycled) == 1


async def test_without_power_control_a_device_is_quarantined_at_twice_the_limit() -> None:
    pool, driver, _, _ = await pool_of("p1", power_cycle_after=2)
    driver.unhealthy["p1"] = "no answer"
    for _ in range(3):
        await pool.check_health()
    assert pool.devices["p1"].state is DeviceState.OFFLINE
    await pool.check_health()
    assert pool.devices["p1"].state is DeviceState.QUARANTINED
    assert "no power control configured" in pool.devices["p1"].reason


async def test_a_healthy_check_brings_an_offline_device_back() -> None:
    pool, driver, _, _ = await pool_of("p1")
    driver.unhealthy["p1"] = "no answer"
    await pool.check_health()
    del driver.unhealthy["p1"]
    await pool.check_health()
    assert pool.devices["p1"].state is DeviceState.AVAILABLE


async def test_infrastructure_failures_in_a_row_quarantine_and_a_success_resets_them() -> None:
    pool, _, _, _ = await pool_of("p1", quarantine_after=2)
    await pool.acquire("p1", "j1")
    assert pool.available() == []
    await pool.release("p1", infra_failure="adb gone")
    assert pool.devices["p1"].consecutive_failures == 1
    await pool.acquire("p1", "j2")
    await pool.release("p1")  # a clean run
    assert pool.devices["p1"].consecutive_failures == 0
    for job in ("j3", "j4"):
        await pool.acquire("p1", job)
        await pool.release("p1", infra_failure="adb gone")
    device = pool.devices["p1"]
    assert device.state is DeviceState.QUARANTINED
    assert device.reason == "2 infrastructure failures in a row; last: adb gone"


async def test_drain_puts_a_device_in_maintenance_and_enable_lifts_a_quarantine() -> None:
    pool, _, store, _ = await pool_of("p1", quarantine_after=1)
    await pool.set_admin("p1", AdminState.DRAINING)
    assert pool.devices["p1"].state is DeviceState.MAINTENANCE and pool.available() == []
    assert store.devices["p1"].admin is AdminState.DRAINING
    await pool.set_admin("p1", AdminState.ENABLED)
    await pool.acquire("p1", "j")
    await pool.release("p1", infra_failure="x")
    assert pool.devices["p1"].state is DeviceState.QUARANTINED
    await pool.set_admin("p1", AdminState.ENABLED)
    assert pool.devices["p1"].state is DeviceState.AVAILABLE
    assert pool.devices["p1"].consecutive_failures == 0


async def test_an_unknown_device_cannot_be_drained() -> None:
    pool, _, _, _ = await pool_of("p1")
    assert await pool.set_admin("nope", AdminState.DRAINING) is None


async def test_a_device_that_vanishes_goes_offline_and_comes_back_when_seen() -> None:
    pool, driver, _, _ = await pool_of("p1", "p2")
    driver.ids.remove("p2")
    await pool.discover()
    gone = pool.devices["p2"]
    assert (gone.state, gone.reason) == (DeviceState.OFFLINE, "vanished")
    driver.ids.append("p2")
    await pool.discover()
    assert pool.devices["p2"].state is DeviceState.AVAILABLE


async def test_a_device_gone_is_said_gone_with_what_its_driver_knows_of_why() -> None:
    pool, driver, _, _ = await pool_of("p1", "p2")
    driver.why_absent = lambda device_id: "adb state unauthorized: accept the key"
    driver.ids.remove("p2")
    await pool.discover()
    gone = pool.devices["p2"]
    assert gone.reason == "vanished: adb state unauthorized: accept the key"
    await pool.check_health()  # a health check alone does not bring it back
    assert pool.devices["p2"].state is DeviceState.OFFLINE
    driver.ids.append("p2")
    await pool.discover()
    assert pool.devices["p2"].state is DeviceState.AVAILABLE


async def test_a_busy_device_back_from_a_blip_is_busy_not_available() -> None:
    """A phone offline for 5 s mid-job came back 'available' while its job ran on: the list
    and the queue's explanation offered it to the next job (a tester's find)."""
    pool, driver, _, _ = await pool_of("p1")
    await pool.acquire("p1", "j1")
    driver.ids.remove("p1")
    await pool.discover()
    assert pool.devices["p1"].state is DeviceState.OFFLINE
    driver.ids.append("p1")
    await pool.discover()
    assert pool.devices["p1"].state is DeviceState.BUSY and pool.available() == []
    assert "j1" in pool.devices["p1"].reason
    await pool.release("p1")
    assert pool.devices["p1"].state is DeviceState.AVAILABLE


async def test_a_change_the_store_did_not_take_is_saved_on_the_next_pass() -> None:
    pool, _, store, _ = await pool_of("p1")
    store.failing = True
    await pool.acquire("p1", "j1")  # the pool's own view stands meanwhile
    assert pool.devices["p1"].state is DeviceState.BUSY
    assert store.devices["p1"].state is DeviceState.AVAILABLE
    store.failing = False
    await pool.discover()
    assert store.devices["p1"].state is DeviceState.BUSY


async def test_a_device_whose_power_plugin_failed_is_quarantined_with_the_reason() -> None:
    power: Plugins[Any] = Plugins(Registry(POWER_GROUP))
    power.failed["p1"] = "relay on /dev/ttyUSB0 not found"
    pool = Pool(
        {"scripted": ScriptedDriver(["p1"])}, power, DeviceMemory(), EventBus(), PoolSettings(), "h"
    )
    await pool.discover()
    device = pool.devices["p1"]
    assert (device.state, device.reason) == (
        DeviceState.QUARANTINED,
        "relay on /dev/ttyUSB0 not found",
    )


class CarelessDriver(ScriptedDriver):
    """A plugin's discover() as a tester wrote it: ids set after the Device was built (its
    rules never checked), another driver's name, one id twice, not a Device at all; or, with
    `answer`, something other than a list."""

    answer: Any = None

    async def discover(self) -> Any:
        if self.answer is not None:
            return self.answer
        good, *_ = await super().discover()
        slashed = good.model_copy()
        slashed.id = "fl/1#"  # assignment is not validated
        spaced = good.model_copy(update={"id": "ünï x"})  # nor is model_copy's update
        foreign = good.model_copy(update={"id": "other-1", "driver": "gizmo"})
        return [good, slashed, spaced, foreign, good.model_copy(), "not a device", 42]


async def test_what_a_driver_returns_wrong_is_left_out_and_said_once() -> None:
    """A tester's plugin stored ids like `fl/1#`: every submission, device listing and the
    daemon's next start then failed on the stored row (a pydantic ValidationError), and a
    discover() returning strings stopped the daemon at its start."""
    driver = CarelessDriver(["p1"])
    store = DeviceMemory()
    pool = Pool({"scripted": driver}, {}, store, EventBus(), PoolSettings(), "h")
    with structlog.testing.capture_logs() as logs:
        await pool.discover()
        await pool.discover()
    assert list(pool.devices) == list(store.devices) == ["p1"]
    said = [(e["device"], e["problem"]) for e in logs if e["event"].startswith("device left out")]
    assert len(said) == 6  # once each, though discovery ran twice
    problems = dict(said)
    assert "String should match pattern" in problems["'fl/1#'"]
    assert "String should match pattern" in problems["'ünï x'"]
    assert problems["'other-1'"] == "its driver is 'gizmo', not 'scripted'"
    assert problems["'p1'"] == "another device has the id 'p1'"
    assert problems["'not a device'"] == "a str, not a Device"
    assert problems["42"] == "a int, not a Device"
    # Not a list: a failed discovery, which keeps the driver's devices as they were.
    driver.answer = "garbage"
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):  # said once while it lasts (it was a line every pass)
            await pool.discover()
            await pool.check_health()
        # Offline, not unhealthy: the fault is its driver's (an adb server hung quarantined
        # every phone through their health checks).
        p1 = pool.devices["p1"]
        assert (p1.state, p1.consecutive_failures) == (DeviceState.OFFLINE, 0)
        assert p1.reason.startswith("its driver's discovery fails: ValueError(")
        driver.answer = None
        await pool.discover()
    (failed,) = [e for e in logs if e["event"] == "discovery failed"]
    assert (
        failed["driver"] == "scripted" and "returned str, not a list of Device" in failed["error"]
    )
    assert [e["driver"] for e in logs if e["event"] == "discovery works again"] == ["scripted"]
    assert pool.devices["p1"].state is DeviceState.AVAILABLE


async def test_a_device_its_driver_has_not_found_since_the_start_stays_offline() -> None:
    """After a restart a device stored by the run before became available through its health
    check alone, though its driver's discovery had failed ever since (a plugin tester)."""
    driver = CarelessDriver(["p1"])
    driver.answer = "garbage"  # every discovery fails
    stored = Device(id="p1", driver="scripted", platform="scripted", host="h")
    pool = Pool({"scripted": driver}, {}, DeviceMemory([stored]), EventBus(), PoolSettings(), "h")
    await pool.start()
    try:
        await pool.check_health()
        device = pool.devices["p1"]
        assert (device.state, device.reason) == (DeviceState.OFFLINE, "not discovered yet")
        driver.answer = None  # found again: available
        await pool.discover()
        assert pool.devices["p1"].state is DeviceState.AVAILABLE
    finally:
        await pool.stop(1)


async def test_a_device_busy_with_a_job_and_free_after_it_is_said_at_debug() -> None:
    """Two info lines a job, a quarter of a long run's log: the job's own lines name the
    device. Any other change of state stays at info."""
    pool, driver, _, _ = await pool_of("p1")
    with structlog.testing.capture_logs() as logs:
        await pool.acquire("p1", "j1")
        await pool.release("p1")
        driver.unhealthy["p1"] = "adb offline"
        await pool.check_health()
    changes = [(e["was"], e["state"], e["log_level"]) for e in logs
               if e["event"] == "device state changed"]  # fmt: skip
    assert changes == [
        ("available", "busy", "debug"),
        ("busy", "available", "debug"),
        ("available", "offline", "info"),
    ]


class ThreadedDriver(ScriptedDriver):
    """Builds its devices on a thread of its own, as plugins.md advises for calls that hang."""

    async def discover(self) -> list[Device]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: asyncio.run(super(ThreadedDriver, self).discover())
        )


@pytest.mark.parametrize("kind", [ScriptedDriver, ThreadedDriver])
async def test_a_bad_id_built_in_discover_leaves_out_that_device_only(kind: type) -> None:
    """A plugin written as plugins.md shows (`Device(id=...)` in discover()) was given a
    file named `bad;id`: building that Device raised, and every device of its driver went
    offline with pydantic's text as the reason."""
    from pydantic import ValidationError

    store = DeviceMemory()
    pool = Pool(
        {"scripted": kind(["p1", "bad;id", "p2", "x" * 200, ""])}, {}, store, EventBus(),
        PoolSettings(), "h",
    )  # fmt: skip
    with structlog.testing.capture_logs() as logs:
        await pool.discover()
    assert sorted(pool.devices) == sorted(store.devices) == ["p1", "p2"]
    assert pool.devices["p1"].state is DeviceState.AVAILABLE
    said = {e["device"]: e["problem"] for e in logs if e["event"].startswith("device left out")}
    assert "String should match pattern" in said["'bad;id'"]
    for too_short_or_long in ("''", repr("x" * 200)[:140]):
        assert "a device id has 1 to 128 characters" in said[too_short_or_long]
    with pytest.raises(ValidationError, match="String should match pattern"):
        Device.checked({"id": "bad;id", "driver": "scripted", "platform": "scripted"})


async def test_a_power_control_for_a_device_no_driver_found_is_said_once() -> None:
    """`[pool.power.pixel7]` for the device `pixel-7`: the real device had no power control and
    nothing said so."""
    pool = Pool(
        {"scripted": ScriptedDriver(["pixel-7"])}, {"pixel7": RecordingPower()}, DeviceMemory(),
        EventBus(), PoolSettings(), "h",
    )  # fmt: skip
    with structlog.testing.capture_logs() as logs:
        await pool.discover()
        await pool.discover()
    said = [e for e in logs if e["event"] == "power control for a device no driver has found"]
    assert [e["device"] for e in said] == ["pixel7"]


async def test_what_a_driver_says_of_a_known_device_is_taken_afresh() -> None:
    """A phone updated to a new Android kept its old os_version, and every result measured on
    it the old fingerprint, while and after it was rediscovered (restarts included)."""

    class Updating(ScriptedDriver):
        os_version, model = "13", "Pixel 6"

        async def discover(self) -> list[Device]:
            return [d.model_copy(update={"os_version": self.os_version, "model": self.model})
                    for d in await super().discover()]  # fmt: skip

    driver = Updating(["p1"])
    store, bus = DeviceMemory(), EventBus()
    pool = Pool({"scripted": driver}, {}, store, bus, PoolSettings(), "h")
    await pool.discover()
    heard = bus.subscribe("test", DeviceChanged)
    driver.os_version = "14"
    with structlog.testing.capture_logs() as logs:
        await pool.discover()
        await pool.discover()  # said and saved once
    assert pool.devices["p1"].os_version == store.devices["p1"].os_version == "14"
    (said,) = [e for e in logs if e["event"] == "device description changed"]
    assert said["changes"] == {"os_version": ["13", "14"]}
    assert drained(heard) == []  # nothing the MQTT device message carries changed
    assert pool.devices["p1"].state is DeviceState.AVAILABLE

    driver.model = "Pixel 6a"  # the retained device message carries the model: published
    await pool.discover()
    (changed,) = drained(heard)
    assert changed.model == "Pixel 6a" and changed.state == "available"

    # A restart: the stored description is the starting point, the driver's wins again.
    driver.os_version = "15"
    again = Pool({"scripted": driver}, {}, store, EventBus(), PoolSettings(), "h")
    await again.start()
    try:
        assert again.devices["p1"].os_version == "15"
        assert again.devices["p1"].state is DeviceState.AVAILABLE
    finally:
        await again.stop(1)


async def test_a_device_its_driver_sees_but_cannot_offer_yet_is_listed_with_what_to_do() -> None:
    """A phone plugged in that had not accepted this computer's key was missing from `labd
    devices list` without a word: it is listed offline, saying what to do, until it is ready."""

    class Waiting(ScriptedDriver):
        def __init__(self) -> None:
            super().__init__(["p1"])
            self.not_ready = {"p2": "adb state unauthorized: accept the key"}

        def waiting(self) -> dict[str, str]:
            return dict(self.not_ready)

    driver = Waiting()
    store, bus = DeviceMemory(), EventBus()
    pool = Pool({"scripted": driver}, {}, store, bus, PoolSettings(), "h")
    heard = bus.subscribe("test", DeviceChanged)
    await pool.discover()
    await pool.check_health()  # a device not offered yet is not checked into service
    waiting = pool.devices["p2"]
    assert (waiting.state, waiting.reason) == (
        DeviceState.OFFLINE, "not ready: adb state unauthorized: accept the key"
    )  # fmt: skip
    assert store.devices["p2"].reason == waiting.reason
    assert [d.id for d in pool.available()] == ["p1"]
    assert sorted((e.device_id, e.state) for e in drained(heard)) == [
        ("p1", "available"), ("p2", "offline")
    ]  # fmt: skip

    driver.not_ready = {}  # accepted: the driver offers it, and describes it
    driver.ids.append("p2")
    await pool.discover()
    assert pool.devices["p2"].state is DeviceState.AVAILABLE
    assert pool.devices["p2"].tags == ["fake"]

    driver.ids.remove("p2")  # unplugged
    driver.not_ready = {"p3": "adb state offline: replug it"}
    await pool.discover()
    assert pool.devices["p2"].reason == "vanished"
    driver.not_ready = {}  # p3 unplugged before it was ever ready: no longer "not ready"
    await pool.discover()
    assert (pool.devices["p3"].state, pool.devices["p3"].reason) == (
        DeviceState.OFFLINE, "vanished"
    )  # fmt: skip


async def test_a_relay_that_stops_answering_holds_the_health_pass_only_so_long() -> None:
    """A serial board that stopped echoing took 11 s a command (330 s at a 30 s time-out)
    while every other device of the host waited for its health check (a tester's find)."""

    class Hanging(RecordingPower):
        async def on(self) -> None:
            self.calls.append("on")
            await asyncio.sleep(3600)

    relay = Hanging()
    pool, driver, _, _ = await pool_of(
        "p1", "p2", power={"p1": relay}, power_cycle_after=1, power_off_s=0.05,
        health_timeout_s=0.1,
    )  # fmt: skip
    driver.unhealthy["p1"] = "adb offline"
    async with asyncio.timeout(2):
        await pool.check_health()
    device = pool.devices["p1"]
    assert relay.calls == ["off", "on"] and device.state is DeviceState.QUARANTINED
    assert device.reason.startswith(
        "power cycle failed (took over 0.25 s, power_off_s and two health_timeout_s; the device "
        "may be left switched off: see to it, then `labd devices enable`) after: adb offline"
    )
    assert pool.devices["p2"].state is DeviceState.AVAILABLE


async def test_a_quarantine_outlasts_a_restart_and_an_unplugging_until_enabled() -> None:
    """A phone quarantined for failing its health checks was offered jobs again after every
    restart or upgrade (the health failures were counted in memory only), and after it was
    unplugged and plugged back in (a tester's find)."""
    pool, driver, store, _ = await pool_of("p1", "p2", power_cycle_after=1)
    driver.unhealthy["p1"] = "adb offline"
    for _ in range(2):
        await pool.check_health()
    reason = pool.devices["p1"].reason
    assert pool.devices["p1"].state is DeviceState.QUARANTINED
    await pool.stop(1)
    assert store.devices["p1"].state is DeviceState.QUARANTINED

    del driver.unhealthy["p1"]  # healthy now: still the administrator's to lift
    again = Pool({"scripted": driver}, {}, store, EventBus(), PoolSettings(), "h")
    await again.start()
    try:
        await again.check_health()
        assert (again.devices["p1"].state, again.devices["p1"].reason) == (
            DeviceState.QUARANTINED, reason
        )  # fmt: skip
        assert [d.id for d in again.available()] == ["p2"]
        driver.ids.remove("p1")  # unplugged, and back
        await again.discover()
        assert again.devices["p1"].state is DeviceState.QUARANTINED
        await again.set_admin("p1", AdminState.ENABLED)  # enabled while gone: found first
        assert (again.devices["p1"].state, again.devices["p1"].reason) == (
            DeviceState.OFFLINE, "vanished"
        )  # fmt: skip
        driver.ids.append("p1")
        await again.discover()
        assert again.devices["p1"].state is DeviceState.AVAILABLE
    finally:
        await again.stop(1)


async def test_a_device_that_drops_to_not_ready_is_offline_not_failing_its_health_checks() -> None:
    """A known phone that dropped to adb "offline" stayed available, failed its health checks
    and was quarantined for good (a re-tester's find): it is offline, not ready, until it is."""

    class Dropping(ScriptedDriver):
        def __init__(self) -> None:
            super().__init__(["p1"])
            self.not_ready: dict[str, Any] = {}

        def waiting(self) -> dict[str, Any]:
            return dict(self.not_ready)

    driver = Dropping()
    pool = Pool({"scripted": driver}, {}, DeviceMemory(), EventBus(), PoolSettings(), "h")
    await pool.discover()
    driver.ids, driver.not_ready = [], {"p1": "adb state offline: replug it"}
    driver.unhealthy["p1"] = "adb state 'offline'"
    await pool.discover()
    for _ in range(5):
        await pool.check_health()
    assert (pool.devices["p1"].state, pool.devices["p1"].reason) == (
        DeviceState.OFFLINE, "not ready: adb state offline: replug it"
    )  # fmt: skip
    driver.ids, driver.not_ready = ["p1"], {}
    del driver.unhealthy["p1"]
    await pool.discover()
    assert pool.devices["p1"].state is DeviceState.AVAILABLE

    driver.not_ready = {"p2": 42}  # a plugin's bad answer: said, not taken
    with structlog.testing.capture_logs() as logs:
        await pool.discover()
    assert "p2" not in pool.devices
    assert [e["problem"] for e in logs if e["event"].startswith("device left out")] == [
        "waiting() gave int 42, not why, in words"
    ]


async def test_tags_in_another_order_are_no_change() -> None:
    """A driver that built its tags from a set rewrote the device, and logged it, every pass."""

    class Shuffling(ScriptedDriver):
        async def discover(self) -> list[Device]:
            self.order = getattr(self, "order", 0) + 1
            tags = ["a", "b", "c"] if self.order % 2 else ["c", "a", "b"]
            return [d.model_copy(update={"tags": tags}) for d in await super().discover()]

    pool, _, _, _ = await pool_of("p1")
    pool.drivers["scripted"] = driver = Shuffling(["p1"])
    with structlog.testing.capture_logs() as logs:
        for _ in range(4):
            await pool.discover()
    changed = [e for e in logs if e["event"] == "device description changed"]
    assert len(changed) == 1 and changed[0]["changes"] == {"tags": [["fake"], ["a", "b", "c"]]}
    assert driver.order == 4

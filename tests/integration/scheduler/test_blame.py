"""Blame the right party: a spec that cannot start fails the job, never the device; jobs only
go to drivers that offer their scenario; a retry after an infrastructure failure goes to
another device; a failing plugin breaks only its own device."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from labd.model import DeviceState, JobState, TestSpec
from labd.store import Store
from labd_host import HostDriver
from labd_host.driver import HostOptions
from tests.integration.scheduler.test_scheduler import Lab, make_lab
from tests.scripted_driver import NappingDriver, RecordingPower


async def until(condition: Callable[[], bool], within: float = 10) -> None:
    async with asyncio.timeout(within):
        while True:
            if condition():
                return
            await asyncio.sleep(0.05)


async def stop(lab: Lab) -> None:
    await lab.scheduler.stop(1)
    await lab.pool.stop(1)
    lab._recorder.cancel()  # type: ignore[attr-defined]


async def test_a_job_runs_only_where_the_driver_offers_its_scenario(
    store: Store, tmp_path: Path
) -> None:
    # The napping driver's device is offered work first; it must not take a `script` job
    # that names no platform (it used to, fail with "driver bug" and be quarantined).
    napper = NappingDriver(["n1"])
    lab = await make_lab(store, tmp_path, ["d1"], others=[napper], quarantine_after=1)
    try:
        await lab.submit("anywhere", spec={"device": {}})
        job = await lab.wait_state("anywhere", JobState.SUCCEEDED, JobState.FAILED)
        assert (job.state, job.device_id, job.attempts) == (JobState.SUCCEEDED, "d1", 1)
        n1 = lab.pool.devices["n1"]
        assert (n1.state, n1.consecutive_failures) == (DeviceState.AVAILABLE, 0)
        await lab.jobs.submit(
            {"suite": "s", "test": "nap", "scenario": "nap", "iterations": 1}, "m.toml", "nap1"
        )
        assert (await lab.wait_state("nap1", JobState.SUCCEEDED)).device_id == "n1"
    finally:
        await stop(lab)


async def test_a_program_missing_on_the_running_host_fails_the_job_not_the_device(
    store: Store, tmp_path: Path
) -> None:
    host = HostDriver(HostOptions(), "test-host")
    lab = await make_lab(store, tmp_path, [], others=[host], quarantine_after=1)
    try:
        # Accepted by another host, where the program exists: this host must not blame its
        # device for it (it used to count three infrastructure failures and quarantine it).
        spec = TestSpec(
            suite="s",
            test="t",
            scenario="command",
            iterations=2,
            params={"command": ["labd-no-such-program-anywhere"]},
        )
        await store.submit_job("elsewhere", spec, "ci")
        lab.scheduler.wake()
        job = await lab.wait_state("elsewhere", JobState.FAILED, JobState.SUCCEEDED)
        assert job.state is JobState.FAILED and job.attempts == 1
        assert job.error.startswith("cannot start: on ")
        assert "program 'labd-no-such-program-anywhere' not found" in job.error
        (device,) = [d for d in lab.pool.devices.values() if d.driver == "host"]
        assert (device.state, device.consecutive_failures) == (DeviceState.AVAILABLE, 0)
        assert await store.iterations("elsewhere") == []
    finally:
        await stop(lab)


async def test_input_the_device_cannot_take_fails_the_job_once_not_the_device(
    store: Store, tmp_path: Path
) -> None:
    # A key the device has no name for, met mid-run: the same on every device. It used to be
    # a "driver bug", retried on each device and counted against it until quarantine.
    lab = await make_lab(store, tmp_path, ["d1", "d2"], quarantine_after=1)
    try:
        await lab.submit("badkey", bad_key_iteration=1)
        job = await lab.wait_state("badkey", JobState.FAILED, JobState.SUCCEEDED)
        assert (job.state, job.attempts) == (JobState.FAILED, 1)
        why = "key 'Page_Dwn': no key named 'Page_Dwn'"
        assert job.error == f"invalid input for {job.device_id}: {why}"
        for device in lab.pool.devices.values():
            assert (device.state, device.consecutive_failures) == (DeviceState.AVAILABLE, 0)
    finally:
        await stop(lab)


async def test_a_capture_lost_mid_run_is_the_device_s_failure_retried(
    store: Store, tmp_path: Path
) -> None:
    # A display or capture card gone mid-run: not the job's input (CaptureError is a
    # UsageError for the CLI's exit code) and no driver bug, but the device's condition.
    lab = await make_lab(store, tmp_path, ["d1"])
    try:
        await lab.submit("filmed", capture_lost_attempts=1)
        job = await lab.wait_state("filmed", JobState.SUCCEEDED, JobState.FAILED, within=20)
        assert (job.state, job.attempts) == (JobState.SUCCEEDED, 2)
        (requeued,) = [e for e in lab.events if e.kind == "job_requeued"]  # type: ignore[attr-defined]
        assert requeued.reason == (  # type: ignore[attr-defined]
            "infrastructure failure: capture failed: capture.avi: X11 display ':0': cannot open it"
        )
    finally:
        await stop(lab)


async def test_an_infrastructure_retry_goes_to_another_device_once_one_is_free(
    store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1", "d2"])
    try:
        # The blocker holds one device for about a second; the flaky job fails at once on the
        # other. Its failed device is free first, but the retry waits for the other one.
        await lab.submit("blocker", sleep_s=0.3, spec={"iterations": 3})
        blocker = await lab.wait_state("blocker", JobState.RUNNING)
        await lab.submit("flaky", infra_failures=1)
        job = await lab.wait_state("flaky", JobState.SUCCEEDED)
        leased = [e.device_id for e in lab.events if e.kind == "job_leased" and e.job_id == "flaky"]  # type: ignore[attr-defined]
        assert job.attempts == 2
        assert leased == [({"d1", "d2"} - {blocker.device_id}).pop(), blocker.device_id]
        assert {i.device_id for i in await store.iterations("flaky")} == {blocker.device_id}
    finally:
        await stop(lab)


async def test_the_same_bug_on_two_devices_fails_the_job_and_quarantines_neither(
    store: Store, tmp_path: Path
) -> None:
    """A plugin tester's find: a scenario that raises on every device was retried on each,
    every attempt counted against its device, and two such jobs quarantined healthy ones."""
    lab = await make_lab(store, tmp_path, ["d1", "d2"], quarantine_after=2)
    try:
        await lab.submit("buggy", bug=True, spec={"max_attempts": 3})
        job = await lab.wait_state("buggy", JobState.FAILED, JobState.SUCCEEDED, within=20)
        leased = [e.device_id for e in lab.events if e.kind == "job_leased" and e.job_id == "buggy"]  # type: ignore[attr-defined]
        assert job.attempts == 2 and set(leased) == {"d1", "d2"}
        assert job.error == (
            f"driver bug: RuntimeError: scripted bug (on {leased[0]} and {leased[1]}: the "
            "job's, not a device's)"
        )
        await until(lambda: not lab.pool.busy)
        failures = {d: lab.pool.devices[d].consecutive_failures for d in ("d1", "d2")}
        assert failures == {leased[0]: 1, leased[1]: 0}
        assert {lab.pool.devices[d].state for d in failures} == {DeviceState.AVAILABLE}
    finally:
        await stop(lab)


async def test_an_error_of_48_kb_with_nul_bytes_is_kept_short_and_visible(
    store: Store, tmp_path: Path
) -> None:
    """A library's message quoting a whole input (a times file read back with NUL bytes) went
    whole into the job, its MQTT events and the database: 48 KB, and PostgreSQL's text takes
    no NUL. Still told as the same bug on both devices."""
    lab = await make_lab(store, tmp_path, ["d1", "d2"], quarantine_after=2)
    message = "could not convert string to float: '" + "\0" * 48_000 + "1.5' in capture.times"
    try:
        await lab.submit("long", bug=True, bug_message=message, spec={"max_attempts": 3})
        job = await lab.wait_state("long", JobState.FAILED, JobState.SUCCEEDED, within=20)
        assert job.attempts == 2 and len(job.error) == 2000
        assert job.error.startswith("driver bug: RuntimeError: could not convert string to float")
        assert "\\x00\\x00" in job.error and "\0" not in job.error
        assert "characters, cut to 2,000 ...]" in job.error
        assert job.error.endswith("the job's, not a device's)")
        requeued = [e for e in lab.events if e.kind == "job_requeued"]  # type: ignore[attr-defined]
        assert requeued and all(len(e.reason) <= 2000 for e in requeued)
    finally:
        await stop(lab)


async def test_a_retry_comes_back_to_its_device_when_no_other_is_free(
    store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1", "d2"])
    try:
        await lab.submit("blocker", sleep_s=5, spec={"iterations": 3})
        blocker = await lab.wait_state("blocker", JobState.RUNNING)
        await lab.submit("flaky", infra_failures=1)
        job = await lab.wait_state("flaky", JobState.SUCCEEDED, within=15)
        other = {"d1", "d2"} - {blocker.device_id}
        assert job.attempts == 2 and {job.device_id} == other
        assert (await store.get_job("blocker")).state is JobState.RUNNING  # type: ignore[union-attr]
    finally:
        await stop(lab)


async def test_a_failing_power_relay_breaks_its_device_and_the_health_loop_goes_on(
    store: Store, tmp_path: Path
) -> None:
    relay = RecordingPower(broken="relay board not answering on /dev/ttyUSB0")
    lab = await make_lab(
        store, tmp_path, ["d1", "d2"], power={"d1": relay}, power_cycle_after=1, power_off_s=0
    )
    try:
        lab.driver.unhealthy["d1"] = "adb: device offline"
        await until(lambda: lab.pool.devices["d1"].state is DeviceState.QUARANTINED)
        assert "power cycle failed" in lab.pool.devices["d1"].reason
        assert "relay board not answering" in lab.pool.devices["d1"].reason
        # The health loop still looks after the other device.
        lab.driver.unhealthy["d2"] = "screen stuck"
        await until(lambda: lab.pool.devices["d2"].state is DeviceState.OFFLINE)
        assert lab.pool.devices["d2"].reason == "screen stuck"
    finally:
        await stop(lab)


@pytest.mark.parametrize("store", ["sqlite"], indirect=True)
async def test_a_plugin_that_fails_to_start_breaks_only_its_own_devices(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labd.model import Device
    from labd.pool import Pool, load_drivers, load_power, plugins
    from labd.sdk import PowerControl, Registry

    class ExplodingDriver(NappingDriver):
        name = "exploding"

        def __init__(self, *args: object) -> None:
            raise RuntimeError("libusb missing")

    class ExplodingPower(PowerControl):
        def __init__(self, *args: object) -> None:
            raise OSError(2, "No such file or directory: '/dev/ttyUSB9'")

        async def on(self) -> None: ...
        async def off(self) -> None: ...

    found = {"labd.drivers": {"exploding": ExplodingDriver, "host": HostDriver}}
    found["labd.power"] = {"relay": ExplodingPower}
    # A plugin tester's find: a refused driver's devices kept the reason of the last stop.
    refused = {"labd.drivers": {"clashing": "2 plugins are registered as 'clashing': a, b"}}
    monkeypatch.setattr(
        plugins, "_plugins", lambda group: Registry(group, found[group], refused.get(group, {}))
    )
    drivers = load_drivers({}, "test-host", "labd.toml")
    power_for = next(iter(await HostDriver(HostOptions(), "test-host").discover())).id
    power = load_power({power_for: {"kind": "relay"}}, "labd.toml")
    assert list(drivers) == ["host"] and list(power) == []
    # The exploding driver's device, known from an earlier run of this host.
    await store.upsert_device(
        Device(id="usb-1", driver="exploding", platform="napping", host="test-host")
    )
    await store.upsert_device(
        Device(id="old-1", driver="clashing", platform="napping", host="test-host",
               state=DeviceState.OFFLINE, reason="labd stopped")
    )  # fmt: skip
    from labd.config import PoolSettings
    from labd.events import EventBus

    pool = Pool(drivers, power, store, EventBus(), PoolSettings(), "test-host")
    await pool.start()
    try:
        usb = pool.devices["usb-1"]
        assert usb.state is DeviceState.OFFLINE
        assert usb.reason == "driver exploding failed to start: RuntimeError: libusb missing"
        old = await store.get_device("old-1")
        assert old is not None and old.reason == (
            "its driver clashing was refused: 2 plugins are registered as 'clashing': a, b"
        )
        host = pool.devices[power_for]
        assert host.state is DeviceState.QUARANTINED
        assert host.reason.startswith("power control relay failed to start: FileNotFoundError")
    finally:
        await pool.stop(1)

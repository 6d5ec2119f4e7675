"""The fleet view: a device whose host runs no labd is shown offline, saying so, whatever state
its row kept when the host died (a kill -9, a power cut, a daemon.host renamed)."""

from __future__ import annotations

from pathlib import Path

import structlog

from labd.config import PoolSettings
from labd.events import EventBus
from labd.model import Device, DeviceState
from labd.pool import Pool
from labd.store import HostName, Store, fleet_device, fleet_devices
from tests.scripted_driver import ScriptedDriver


def _busy(device_id: str, host: str) -> Device:
    return Device(id=device_id, driver="host", platform="host", host=host, state=DeviceState.BUSY)


async def test_a_dead_hosts_devices_are_offline_in_the_fleet_view(postgres_url: str) -> None:
    here = await Store.open(postgres_url, host="rack-a")
    other = await Store.open(postgres_url, host="rack-b")
    name_a, name_b = HostName(here, "rack-a"), HostName(other, "rack-b")
    try:
        await name_a.take()
        await here.upsert_device(_busy("phone-a", "rack-a"))
        await other.upsert_device(_busy("phone-b", "rack-b"))

        await name_b.take()  # rack-b's daemon runs
        shown = {d.id: d for d in await fleet_devices(here)}
        assert shown["phone-a"].state is DeviceState.BUSY
        assert shown["phone-b"].state is DeviceState.BUSY

        await name_b.release()  # rack-b died: its session, and the lock with it, are gone
        shown = {d.id: d for d in await fleet_devices(here)}
        assert shown["phone-a"].state is DeviceState.BUSY
        gone = shown["phone-b"]
        assert gone.state is DeviceState.OFFLINE
        assert gone.reason == "its host 'rack-b' runs no labd (it last reported busy)"
        assert await fleet_device(here, "phone-b") == gone
        # Only the view changes: the row keeps what rack-b last wrote, for when it comes back.
        stored = await here.get_device("phone-b")
        assert stored is not None and stored.state is DeviceState.BUSY

        await name_b.take()  # back
        again = await fleet_device(here, "phone-b")
        assert again is not None and again.state is DeviceState.BUSY
    finally:
        for name in (name_a, name_b):
            await name.release()
        await here.close()
        await other.close()


async def test_on_sqlite_a_renamed_hosts_devices_are_offline(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}"
    before = await Store.open(url, host="old-name")
    await before.upsert_device(_busy("phone", "old-name"))
    await before.close()
    store = await Store.open(url, host="new-name")
    try:
        await store.upsert_device(_busy("desk", "new-name"))
        shown = {d.id: d for d in await fleet_devices(store)}
        assert shown["desk"].state is DeviceState.BUSY
        assert shown["phone"].state is DeviceState.OFFLINE
        assert "its host 'old-name' runs no labd" in shown["phone"].reason
        assert await fleet_device(store, "nothing") is None
    finally:
        await store.close()


async def test_this_hosts_devices_are_never_shown_gone(postgres_url: str) -> None:
    """The daemon answering is running, even while its name's lock is being taken back after a
    database restart."""
    store = await Store.open(postgres_url, host="rack-a")  # its name not held
    try:
        await store.upsert_device(_busy("phone", "rack-a"))
        (device,) = await fleet_devices(store)
        assert device.state is DeviceState.BUSY
    finally:
        await store.close()


async def test_a_second_running_host_offering_the_same_device_id_does_not_take_it(
    postgres_url: str,
) -> None:
    """Two cloned machines (both `host-<hostname>`) on one database: the second daemon stopped
    on a raw IntegrityError, or, started later, wrote the device over as its own, and jobs for
    one machine would have run on the other. It leaves the device to the running host, says
    why once, and takes it when that host is gone (a phone moved to it)."""
    first = await Store.open(postgres_url, host="rack-a")
    second = await Store.open(postgres_url, host="rack-b")
    name_a = HostName(first, "rack-a")
    settings = PoolSettings(discovery_interval_s=60, health_interval_s=60)
    pool = Pool({"scripted": ScriptedDriver(["host-vm"], host="rack-b")}, {}, second,
                EventBus(), settings, "rack-b")  # fmt: skip
    try:
        await name_a.take()
        await first.upsert_device(_busy("host-vm", "rack-a"))
        with structlog.testing.capture_logs() as logs:
            await pool.discover()
            await pool.discover()
        assert "host-vm" not in pool.devices
        stored = await first.get_device("host-vm")
        assert stored is not None and (stored.host, stored.state) == ("rack-a", DeviceState.BUSY)
        (said,) = [e for e in logs if "not taken" in e["event"]]
        assert said["reason"] == "host 'rack-a', which runs labd, offers it"
        assert "[drivers.host] id" in said["hint"]

        await name_a.release()  # rack-a is gone: the device is rack-b's now
        await pool.discover()
        assert pool.devices["host-vm"].host == "rack-b"
        stored = await first.get_device("host-vm")
        assert stored is not None and stored.host == "rack-b"
    finally:
        await pool.stop(1)
        await name_a.release()
        await first.close()
        await second.close()


async def test_a_stored_device_no_device_may_be_is_left_out_of_every_listing(
    tmp_path: Path,
) -> None:
    """A plugin stored `fl/1#` before the pool checked what drivers return: every listing,
    submission and the daemon's next start failed on that one row."""
    import sqlalchemy as sa

    from labd.store.tables import devices

    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}", host="rack-a")
    try:
        await store.upsert_device(_busy("phone", "rack-a"))
        bad = _busy("phone", "rack-a").model_dump(mode="json") | {"id": "fl/1#"}
        row = {"id": "fl/1#", "host": "rack-a", "record": bad, "state": "busy", "admin": "enabled"}
        await store.write(
            lambda conn: conn.execute(
                sa.insert(devices).values(**row, updated_at=store.clock.now())
            )
        )
        with structlog.testing.capture_logs() as logs:
            assert [d.id for d in await store.list_devices()] == ["phone"]
            assert await store.get_device("fl/1#") is None
            assert [d.id for d in await fleet_devices(store)] == ["phone"]
        said = [e for e in logs if e["event"] == "stored device left out: not a valid device"]
        assert said and said[0]["device"] == "'fl/1#'"
    finally:
        await store.close()


async def test_a_frozen_hosts_busy_device_is_not_shown_running_a_job_taken_over(
    postgres_url: str,
) -> None:
    """A host stopped with SIGSTOP keeps its name (its session lives), so its devices stayed
    `busy ... (running stopb-3)` while another host ran stopb-3: one job on two devices."""
    from labd.model import running_reason
    from tests.integration.store.test_store import LANE, spec

    here = await Store.open(postgres_url, host="rack-a")
    frozen = await Store.open(postgres_url, host="rack-b")
    names = HostName(here, "rack-a"), HostName(frozen, "rack-b")
    try:
        for name in names:
            await name.take()
        await frozen.submit_job("j1", spec(), "ci")
        lease = await frozen.claim_job("phone-b", [LANE], "rack-b", ttl=30)
        assert lease is not None and await frozen.mark_running("j1", lease.token)
        busy = _busy("phone-b", "rack-b").model_copy(update={"reason": running_reason("j1")})
        await frozen.upsert_device(busy)
        assert await fleet_device(here, "phone-b") == busy  # its job is its own: as stored

        # rack-b stops renewing; rack-a's reaper requeues the job, then rack-a runs it.
        await here.expire_leases(now=here.clock.now() + 60)
        [shown] = [d for d in await fleet_devices(here) if d.id == "phone-b"]
        assert shown.state is DeviceState.OFFLINE
        assert shown.reason == (
            "its host 'rack-b' stopped renewing its lease (its job 'j1' went back to the "
            "queue): the host is frozen, stalled or cut off from the database"
        )
        assert await here.claim_job("phone-a", [LANE], "rack-a", ttl=30) is not None
        shown = await fleet_device(here, "phone-b")
        assert shown is not None and "(its job 'j1' moved to phone-a)" in shown.reason
        stored = await here.get_device("phone-b")  # only the view changes
        assert stored is not None and stored.state is DeviceState.BUSY
    finally:
        for name in names:
            await name.release()
        await here.close()
        await frozen.close()


async def test_a_device_whose_job_has_just_ended_is_still_shown_busy(tmp_path: Path) -> None:
    """Between a job's end and its device's release a listing must not call the host lost."""
    from labd.model import JobState, running_reason
    from tests.integration.store.test_store import LANE, spec

    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}", host="rack-a")
    try:
        await store.submit_job("j1", spec(), "ci")
        lease = await store.claim_job("phone", [LANE], "rack-a", ttl=30)
        assert lease is not None and await store.mark_running("j1", lease.token)
        busy = _busy("phone", "rack-a").model_copy(update={"reason": running_reason("j1")})
        await store.upsert_device(busy)
        assert await store.finish_job("j1", lease.token, JobState.SUCCEEDED)
        assert await fleet_device(store, "phone") == busy
    finally:
        await store.close()


async def test_an_artefact_listing_names_the_host_the_job_ran_on(
    store: Store, tmp_path: Path
) -> None:
    """A re-tester's find: a job that ended when its host died has no lease owner, and every
    host asked said `ran_on` itself, sending CI to the wrong host for its files."""
    from labd.artefacts import ArtefactKeeper
    from labd.config import ArtefactSettings
    from labd.daemon.artefact_routes import ArtefactRoutes
    from labd.model import TestSpec

    await store.upsert_device(Device(id="phone-a", driver="host", platform="host", host="rack-a"))
    await store.submit_job("gone", TestSpec(suite="s", test="t", scenario="x"), "ci")
    job = await store.get_job("gone")
    assert job is not None
    job = job.model_copy(update={"device_id": "phone-a", "lease_owner": ""})
    keeper = ArtefactKeeper(tmp_path, ArtefactSettings(), store, EventBus())
    listing = await ArtefactRoutes(store, keeper, "rack-b", None).listing(job)  # type: ignore[arg-type]
    assert (listing["host"], listing["ran_on"]) == ("rack-b", "rack-a")

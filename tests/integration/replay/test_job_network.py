"""A job that names a network archive: checked at submit, served by its own replay server
while it runs, with the profile in every iteration's fingerprint."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from labd.config import ReplaySettings
from labd.errors import InvalidSpec
from labd.events import EventBus
from labd.model import JobState
from labd.replay.har import har_document, har_entry
from labd.replay.shaping import PROFILES
from labd.runner.run import run_job
from labd.scheduler.submit import JobService
from labd.store import Store
from labd_host import HostDriver
from labd_host.driver import HostOptions
from tests.conftest import policy_for_tests

# Fetches the page through the job's proxy and appends how long that took to ./fetch_ms: the
# request's own time, without a Python start-up that varies with the machine's load.
FETCH = """
import time, urllib.request
started = time.monotonic()
body = urllib.request.urlopen('http://site.test/').read().decode()
with open('fetch_ms', 'a') as out:
    out.write(f"{(time.monotonic() - started) * 1000}\\n")
print(body)
"""


def spec(**network: Any) -> dict[str, Any]:
    return {
        "suite": "net",
        "test": "fetch",
        "scenario": "command",
        "iterations": 2,
        "warmup": 0,
        "params": {"command": [sys.executable, "-c", FETCH]},
        "network": network,
    }


@pytest.fixture
def archives(tmp_path: Path) -> Path:
    entry = har_entry(
        "GET", "http://site.test/", [], b"", 200, "OK", [], b"from the archive", "", 1
    )
    (tmp_path / "site.har").write_text(json.dumps(har_document([entry], "test")))
    return tmp_path


async def test_bad_network_is_refused_at_submit_with_every_reason(
    store: Store, archives: Path
) -> None:
    driver = HostDriver(HostOptions(), "h1")
    for device in await driver.discover():  # a device fits: the network is what is wrong
        await store.upsert_device(device.model_copy(update={"host": "h1"}))
    jobs = JobService(
        store,
        {"host": driver},
        EventBus(),
        replay=ReplaySettings(archive_dir=str(archives)),
        policy=policy_for_tests(),
    )
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(spec(archive="../../etc/passwd", profile="5g"), "job.toml", submitter="t")
    assert caught.value.problems == [
        "job.toml: network.profile: unknown; known: " + ", ".join(PROFILES),
        f"job.toml: network.archive: '../../etc/passwd' is outside replay.archive_dir ({archives})",
    ]
    with pytest.raises(InvalidSpec, match=r"network.archive: no such file .*missing.har"):
        await jobs.submit(spec(archive="missing.har"), "job.toml", submitter="t")
    (archives / "dir.har").mkdir()  # it was "no such file"
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(spec(archive="dir.har"), "job.toml", submitter="t")
    assert caught.value.problems == [
        f"job.toml: network.archive: {archives / 'dir.har'} is not a regular file (a directory)"
    ]
    lost = spec(archive="site.har")
    lost["params"]["url"] = "http://site.test/not-recorded"
    with pytest.raises(
        InvalidSpec,
        match=r"not-recorded is not in the archive site\.har",
    ):
        await jobs.submit(lost, "job.toml", submitter="t")


async def test_the_job_reaches_its_pages_through_the_shaped_replay_server(
    store: Store, archives: Path, tmp_path: Path
) -> None:
    driver = HostDriver(HostOptions(), "h1")
    settings = ReplaySettings(archive_dir=str(archives))
    jobs = JobService(
        store, {"host": driver}, EventBus(), replay=settings, policy=policy_for_tests()
    )
    device = await store.upsert_device((await driver.discover())[0])
    results = {}
    for name, latency in (("fast", None), ("slow", 250)):
        job, _ = await jobs.submit(
            spec(archive="site.har", profile="none", latency_ms=latency),
            "job.toml",
            job_id=name,
            submitter="t",
        )
        params = jobs.params_of(job.spec, driver)
        outcome = await run_job(
            job,
            device,
            driver,
            params,
            store,
            EventBus(),
            tmp_path / name,
            settings,
            policy=policy_for_tests(),
        )
        assert outcome.state is JobState.SUCCEEDED, outcome.error
        results[name] = await store.iterations(name)
    slow = results["slow"]
    assert slow[0].fingerprint["network"] == {
        "name": "none+custom", "latency_ms": 250.0, "down_kbps": 0.0, "up_kbps": 0.0,
        "jitter_ms": 0.0, "loss": 0.0, "archive": "site.har",
    }  # fmt: skip
    # Each fetch opens a connection (one round trip) and asks once (another): at least 500 ms
    # through the shaped server, whatever the load; the unshaped one a round trip quicker at least.
    fetched = {
        name: [float(ms) for ms in next((tmp_path / name).rglob("fetch_ms")).read_text().split()]
        for name in results
    }
    assert len(fetched["slow"]) == len(slow) == 2
    for fast_ms, shaped_ms in zip(fetched["fast"], fetched["slow"], strict=True):
        assert shaped_ms >= 500 and fast_ms < shaped_ms - 250
    assert all(shaped.values["wall_time_ms"] >= 500 for shaped in slow)  # its run holds it


async def test_an_archive_that_cannot_be_served_is_refused_at_submit(
    store: Store, archives: Path
) -> None:
    """A truncated or 100,000-deep archive passed submit, then failed every attempt as an
    infrastructure failure (the device quarantined after three); with params.url the deep one
    was an HTTP 500 (RecursionError)."""
    (archives / "cut.har").write_text('{"log": {"entries": [')
    (archives / "deep.har").write_text("[" * 100_000 + "]" * 100_000)
    jobs = JobService(
        store,
        {"host": HostDriver(HostOptions(), "h1")},
        EventBus(),
        replay=ReplaySettings(archive_dir=str(archives)),
        policy=policy_for_tests(),
    )
    for name, says in (
        ("cut.har", r"not JSON .*truncated\?"),
        ("deep.har", "arrays and objects nested more than 64"),
    ):
        for url in (None, "http://site.test/"):
            job = spec(archive=name)
            if url:
                job["params"]["url"] = url
            with pytest.raises(InvalidSpec, match=rf"job.toml: network.archive: .*{name}: {says}"):
                await jobs.submit(job, "job.toml", submitter="t")


MISSING = """
import urllib.request
# A browser's own requests (a site never recorded, the tab's icon) are no part of the page;
# the page's script is.
for url in ('http://update.example.org/check', 'http://site.test/favicon.ico',
            'http://site.test/app.js'):
    try:
        urllib.request.urlopen(url)
    except Exception:
        pass  # the page goes on without its script, and is quick
"""


async def test_requests_the_archive_does_not_hold_set_their_iteration_aside(
    store: Store, archives: Path, tmp_path: Path
) -> None:
    """Every request a 404: the job succeeded with quick numbers, the misses in the log only
    (a replay tester). Now each iteration says it, and is set aside; so is the job's result."""
    driver = HostDriver(HostOptions(), "h1")
    settings = ReplaySettings(archive_dir=str(archives))
    jobs = JobService(
        store, {"host": driver}, EventBus(), replay=settings, policy=policy_for_tests()
    )
    device = await store.upsert_device((await driver.discover())[0])
    bad = spec(archive="site.har", profile="none") | {
        "params": {"command": [sys.executable, "-c", MISSING]}
    }
    job, _ = await jobs.submit(bad, "job.toml", job_id="misses", submitter="t")
    outcome = await run_job(
        job, device, driver, jobs.params_of(job.spec, driver), store, EventBus(),
        tmp_path / "misses", settings, policy=policy_for_tests(),
    )  # fmt: skip
    flag = "requests the replay archive does not hold: 1 (the last: GET http://site.test/app.js)"
    assert outcome.state is JobState.FAILED
    assert outcome.error == f"every measured iteration (2) was set aside; first: {flag}"
    assert [(it.flags, it.set_aside) for it in await store.iterations("misses")] == [
        ([flag], True),
        ([flag], True),
    ]


async def test_an_archive_with_thousands_of_unservable_entries_still_starts(
    store: Store, tmp_path: Path
) -> None:
    """Each skipped entry was a line on the server's stderr, read only once it listened: past
    64 KiB of them the pipe filled, the server stalled, and the job timed out on the device."""
    good = har_entry("GET", "http://site.test/", [], b"", 200, "OK", [], b"ok", "", 1)
    broken = [
        har_entry("GET", f"http://site.test/{n}", [], b"", 200, "OK", [], b"", "", 1)
        | {"response": {"status": "abc"}}
        for n in range(3000)
    ]
    (tmp_path / "site.har").write_text(json.dumps(har_document([good, *broken], "test")))
    driver = HostDriver(HostOptions(), "h1")
    settings = ReplaySettings(archive_dir=str(tmp_path))
    jobs = JobService(
        store, {"host": driver}, EventBus(), replay=settings, policy=policy_for_tests()
    )
    device = await store.upsert_device((await driver.discover())[0])
    job, _ = await jobs.submit(spec(archive="site.har"), "job.toml", job_id="big", submitter="t")
    async with asyncio.timeout(45):  # it hung for the 60 s the server has to listen
        outcome = await run_job(
            job, device, driver, jobs.params_of(job.spec, driver), store, EventBus(),
            tmp_path / "big", settings, policy=policy_for_tests(),
        )  # fmt: skip
    assert outcome.state is JobState.SUCCEEDED, outcome.error

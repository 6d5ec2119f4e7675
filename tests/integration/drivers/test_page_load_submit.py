"""The page-load scenario's bad input, refused when the job is submitted: nothing is scheduled
for a browser that is not there or a page the archive does not hold."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from labd.config import ReplaySettings
from labd.errors import InvalidSpec
from labd.events import EventBus
from labd.model import Device
from labd.scheduler.submit import JobService
from labd.store import Store
from labd_x11 import X11Driver, X11Options

ROOT = Path(__file__).parents[3]


@pytest.fixture
async def jobs(store: Store) -> JobService:
    await store.upsert_device(Device(id="x11-desk", driver="x11", platform="x11"))
    driver = X11Driver(X11Options(), "x11")  # no display needed: submit checks only
    return JobService(
        store, {"x11": driver}, EventBus(), replay=ReplaySettings(archive_dir=str(ROOT))
    )


def manifest(**params: object) -> dict[str, object]:
    spec = tomllib.loads((ROOT / "examples/page/chromium-3g.toml").read_text())
    spec["params"] |= params
    return spec


async def test_a_browser_that_is_not_installed(jobs: JobService) -> None:
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(manifest(command=["/opt/no-such-browser"]), "job.toml", submitter="t")
    assert caught.value.problems == [
        "job.toml: params.command: program '/opt/no-such-browser' not found"
    ]
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(manifest(browser="netscape"), "job.toml", submitter="t")
    assert caught.value.problems == [
        "job.toml: params: browser 'netscape': expected chromium or firefox (or a command)"
    ]


async def test_a_page_the_archive_does_not_hold(jobs: JobService) -> None:
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(manifest(url="http://www.labd.test/missing"), "job.toml", submitter="t")
    assert caught.value.problems == [
        "job.toml: params.url: http://www.labd.test/missing is not in the archive site.har"
    ]


async def test_the_example_manifest_is_accepted(jobs: JobService) -> None:
    job, created = await jobs.submit(manifest(), "job.toml", submitter="t")
    assert created and job.spec.params["url"] == "http://www.labd.test/"

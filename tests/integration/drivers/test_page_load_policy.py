"""What a page-load job may start and load, refused at submit with the rule named: its own
browser `command` is a program like the command scenario's, allowed only by policy.programs;
its `url` is a URL (a control character would be typed as a key)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from labd.config import ReplaySettings
from labd.errors import InvalidSpec
from labd.events import EventBus
from labd.model import Device, Policy
from labd.scheduler.submit import JobService
from labd.store import Store
from labd_android import AndroidDriver, AndroidOptions
from labd_x11 import X11Driver, X11Options
from tests.conftest import need_program

ROOT = Path(__file__).parents[3]


async def service(store: Store, programs: list[str]) -> JobService:
    await store.upsert_device(Device(id="x11-desk", driver="x11", platform="x11"))
    policy = Policy.resolve(programs, "/usr/local/bin:/usr/bin:/bin", [], "nobody", euid=1)
    return JobService(
        store,
        {"x11": X11Driver(X11Options(), "x11")},  # no display needed: submit checks only
        EventBus(),
        replay=ReplaySettings(archive_dir=str(ROOT)),
        policy=policy,
    )


def manifest(**params: object) -> dict[str, object]:
    spec = tomllib.loads((ROOT / "examples/page/chromium-3g.toml").read_text())
    spec["params"] |= params
    return spec


async def refused(jobs: JobService, **params: object) -> list[str]:
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(manifest(**params), "job.toml", submitter="t")
    return caught.value.problems


async def test_a_shell_as_the_browser_command_is_refused_by_policy(store: Store) -> None:
    jobs = await service(store, ["python3"])
    command = ["sh", "-c", "id > /tmp/x; sleep 100", "--"]
    assert await refused(jobs, command=command) == [
        "job.toml: params.command: program 'sh' is not allowed by policy.programs "
        "(allowed: python3) (a shell runs only when listed by name)"
    ]


async def test_a_browser_command_runs_only_when_policy_lists_it(store: Store) -> None:
    chromium = need_program("chromium")
    assert await refused(await service(store, ["python3"]), command=[chromium]) == [
        f"job.toml: params.command: program {chromium!r} is not allowed by policy.programs "
        "(allowed: python3)"
    ]
    jobs = await service(store, ["python3", "chromium"])
    job, created = await jobs.submit(
        manifest(command=["chromium", "--enable-features=X"]), "job.toml", submitter="t"
    )
    assert created and job.spec.params["command"][0] == "chromium"


async def test_flags_that_start_another_program_are_refused(store: Store) -> None:
    need_program("chromium")
    jobs = await service(store, ["chromium"])
    assert await refused(jobs, command=["chromium", "--renderer-cmd-prefix=sh -c id"]) == [
        "job.toml: params.command.1: '--renderer-cmd-prefix' makes the browser start another "
        "program, which policy.programs would not have checked"
    ]
    assert len(await refused(jobs, command=["chromium", "-gpu-launcher=/bin/sh"])) == 1
    # A hostile tester's: a profile and an extension of the job's own making (an extension
    # may start a native messaging host), and the crash handler's program, were taken.
    assert await refused(jobs, command=["chromium", "--load-extension=/tmp/x"]) == [
        "job.toml: params.command.1: '--load-extension' loads an extension or a profile the "
        "job prepared (labd gives the browser a fresh profile of its own)"
    ]
    for flag in ["--User-Data-Dir=/tmp/p", "--crashpad-handler-path=/bin/sh"]:
        assert len(await refused(jobs, command=["chromium", flag])) == 1, flag


async def test_the_browser_labd_knows_needs_no_listing(store: Store) -> None:
    need_program("chromium")
    jobs = await service(store, ["python3"])  # the default policy: no browser listed
    job, created = await jobs.submit(manifest(), "job.toml", submitter="t")
    assert created and job.spec.params["browser"] == "chromium"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://www.labd.test/\nzzz", r"contains '\n' (U+000A)"),
        ("http://www.labd.test/\tx", r"contains '\t' (U+0009)"),
        ("http://www.labd.test/a b", "contains ' ' (U+0020)"),
        ("javascript:alert(1)", "not an http or https URL, got 'javascript:alert(1)'"),
        ("www.labd.test/", "not an http or https URL, got 'www.labd.test/'"),
        # Opened from the data: sync page, a file: URL timed out on green in every iteration.
        ("file:///srv/page.html", "a file: URL cannot be opened from labd's sync page"),
        ("http:///path", "an http(s) URL must name a host, got 'http:///path'"),
        ("http://x:99999/", "its port: Port out of range 0-65535"),
    ],
)
async def test_a_url_that_is_not_one_is_refused_naming_it(store: Store, url: str, why: str) -> None:
    problems = await refused(await service(store, ["python3"]), url=url)
    assert problems[0].startswith("job.toml: params.url: value error, ")
    assert why in problems[0]


async def phone_service(store: Store) -> JobService:
    await store.upsert_device(Device(id="phone-1", driver="android", platform="android"))
    policy = Policy.resolve(["python3"], "/usr/local/bin:/usr/bin:/bin", [], "nobody", euid=1)
    return JobService(
        store,
        {"android": AndroidDriver(AndroidOptions(), "android")},  # submit checks only
        EventBus(),
        replay=ReplaySettings(archive_dir=str(ROOT)),
        policy=policy,
    )


@pytest.mark.parametrize("example", ["page-load-chrome.toml", "gestures.toml"])
@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://", "an http(s) URL must name a host"),
        ("http://www.labd.test/\x07", r"contains '\x07' (U+0007)"),
        ("http://www.labd.test/\nx", r"contains '\n' (U+000A)"),
        ("http://www.labd.test/a b", "contains ' ' (U+0020)"),
        ("ftp://www.labd.test/", "not an http or https URL"),
    ],
)
async def test_a_phone_url_is_checked_as_a_desktop_one(
    store: Store, example: str, url: str, why: str
) -> None:
    """An independent tester's: on a phone, `http://` and control characters were queued
    (gestures refused only a space, naming `params.(top level)`)."""
    spec = tomllib.loads((ROOT / "examples/android" / example).read_text())
    spec["params"].pop("activity", None)
    spec["params"]["url"] = url
    with pytest.raises(InvalidSpec) as caught:
        await (await phone_service(store)).submit(spec, "job.toml", submitter="t")
    problem = caught.value.problems[0]
    assert problem.startswith("job.toml: params.url: value error, "), problem
    assert why in problem


async def test_a_load_time_out_within_quiet_ms_is_refused_on_desktops_and_phones(
    store: Store,
) -> None:
    """Every iteration failed after the time-out, saying the screen kept changing."""
    why = (
        "params.load_timeout_s: value error, 2 s is not longer than quiet_ms (2000 ms): a page "
        "is done only once still for quiet_ms, so no page could finish, got 2"
    )
    problems = await refused(await service(store, ["python3"]), quiet_ms=2000, load_timeout_s=2)
    assert problems == [f"job.toml: {why}"]
    spec = tomllib.loads((ROOT / "examples/android/page-load-chrome.toml").read_text())
    spec["params"] |= {"quiet_ms": 2000, "load_timeout_s": 2}
    with pytest.raises(InvalidSpec) as caught:
        await (await phone_service(store)).submit(spec, "job.toml", submitter="t")
    assert caught.value.problems == [f"job.toml: {why}"]

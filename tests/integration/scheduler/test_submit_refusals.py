"""Specs that could never start are refused at submit, each with the key and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from labd.errors import InvalidSpec
from labd.events import EventBus
from labd.model import Policy
from labd.scheduler import JobService
from labd.store import Store
from labd_host import HostDriver
from labd_host.driver import HostOptions


@pytest.fixture
async def jobs(tmp_path: Path) -> Any:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}")
    host = HostDriver(HostOptions(), "test-host")
    for device in await host.discover():
        await store.upsert_device(device.model_copy(update={"host": "test-host"}))
    # The admin allows `true` and these variables: what is refused below is refused for
    # being unable to start, not by the policy.
    policy = Policy.resolve(["true", "/bin/true"], "/usr/bin:/bin", ["LANG", "PATH", "A=B"], "", 1)
    yield JobService(store, {"host": host}, EventBus(), policy=policy)
    await store.close()


async def refused(jobs: JobService, **params: Any) -> list[str]:
    spec = {"suite": "s", "test": "t", "scenario": "command", "params": params}
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit(spec, "m.toml")
    return caught.value.problems


async def test_a_nul_byte_in_an_argument_is_refused(jobs: JobService) -> None:
    assert await refused(jobs, command=["true", "a\0b"]) == [
        "m.toml: params.command.1: contains a NUL byte, which no program can get"
    ]


async def test_a_nul_byte_or_a_bad_name_in_the_environment_is_refused(jobs: JobService) -> None:
    assert await refused(jobs, command=["true"], env={"LANG": "C\0"}) == [
        "m.toml: params.env.LANG: contains a NUL byte, which no program can get"
    ]
    assert await refused(jobs, command=["true"], env={"A=B": "1"}) == [
        "m.toml: params.env: 'A=B' is not a valid variable name"
    ]


async def test_an_iteration_timeout_beyond_a_week_is_refused(jobs: JobService) -> None:
    # 1e308 used to be accepted, and the timer thread then died with OverflowError: the
    # iteration ran with no time-out at all.
    assert await refused(jobs, command=["true"], iteration_timeout_s=1e308) == [
        "m.toml: params.iteration_timeout_s: at most 604800 s, got 1e+308"
    ]


async def test_arguments_exec_would_refuse_as_too_long_are_refused(jobs: JobService) -> None:
    # 200 KB of arguments were accepted, failed three times as "cannot start the launcher:
    # Argument list too long" and quarantined the host for an infrastructure fault.
    problems = await refused(jobs, command=["true", "x" * 200_000])
    assert problems == [
        "m.toml: params.command: arguments and environment take 200006 bytes (at most 131072);"
        " pass large inputs in a file"
    ]
    assert await refused(jobs, command=["true"], env={"LANG": "y" * 140_000})


async def test_an_exit_code_no_program_can_return_is_refused(jobs: JobService) -> None:
    problems = await refused(jobs, command=["true"], ok_exit_codes=[10**20])
    assert problems and "ok_exit_codes.0" in problems[0]


async def test_an_environment_given_as_a_string_is_not_echoed(jobs: JobService) -> None:
    # The refusal goes back to the submitter, to the log and to the errors topic: a token
    # pasted as `env = "API_TOKEN=..."` must not travel with it.
    problems = await refused(jobs, command=["true"], env="API_TOKEN=s3cr3t-value")
    assert problems == ["m.toml: params.env: input should be a valid dictionary"]
    problems = await refused(jobs, command=["true"], env={"LANG": 7})
    assert problems == ["m.toml: params.env.LANG: input should be a valid string"]

"""Specs that could never start are refused at submit, each with the key and the reason."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from labd.errors import InvalidSpec
from labd.events import EventBus
from labd.model import Policy
from labd.scheduler import JobService
from labd.store import JobConflict, Store
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


async def test_a_refusal_names_the_device_beside_the_spec_s_other_problems(
    jobs: JobService,
) -> None:
    """The device was checked only when nothing else was wrong: fixed and submitted again,
    the job was refused a second time for what could have been said the first."""
    spec = {"suite": "s", "test": "t", "scenario": "command", "params": {"command": ["nope-x"]}}
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit({**spec, "device": {"platform": "android"}}, "m.toml")
    assert caught.value.problems == [
        "m.toml: params.command: program 'nope-x' not found on this host",
        "m.toml: device: no device in the lab matches platform=android and runs scenario "
        "'command'",
    ]


async def test_a_refusal_quoting_a_huge_value_is_kept_short(jobs: JobService) -> None:
    """5,000 tags no device has: the refusal quoted them all (44 KB, answered, published on
    the errors topic and logged twice). Each problem is at most 2,000 characters, its start
    and end kept."""
    spec = {"suite": "s", "test": "t", "scenario": "command", "params": {"command": ["true"]}}
    tags = [f"t{i}" for i in range(5_000)]
    with pytest.raises(InvalidSpec) as caught:
        await jobs.submit({**spec, "device": {"platform": "host", "tags": tags}}, "m.toml")
    (problem,) = caught.value.problems
    assert len(problem) <= 2_000
    assert problem.startswith("m.toml: device: no device in the lab matches platform=host")
    assert problem.endswith("t4999'] and runs scenario 'command'")


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


async def _service(store: Store) -> JobService:
    """A job service whose one host device fits every job; nothing takes the jobs it queues."""
    host = HostDriver(HostOptions(), "test-host")
    for device in await host.discover():
        await store.upsert_device(device.model_copy(update={"host": "test-host"}))
    policy = Policy.resolve(["true"], "/usr/bin:/bin", [], "", 1)
    return JobService(store, {"host": host}, EventBus(), policy=policy)


TRUE = {"suite": "s", "test": "t", "scenario": "command", "params": {"command": ["true"]}}


async def test_parallel_submissions_cannot_pass_the_quota_on_one_host_or_two(
    store: Store,
) -> None:
    """8 parallel submissions of a principal allowed 3 active jobs were all accepted: the
    quota was counted, then the job inserted later. Now the count is in the inserting
    transaction (SQLite's are serial; PostgreSQL's hold the submitter's advisory lock), here
    through one store and through two, as two hosts of one lab would."""
    from labd.auth import Principal, Role
    from labd.errors import AuthError

    ci = Principal("ci", Role.SUBMITTER, max_active_jobs=3, submits_per_minute=100)
    other_host = await Store.open(store.engine.url.render_as_string(hide_password=False))
    try:
        services = [await _service(store), await _service(other_host)]
        for round_, picked in enumerate(([services[0]] * 8, services * 4)):

            async def submit(job_id: str, jobs: JobService) -> bool:
                try:
                    await jobs.submit(TRUE, "m.toml", job_id, principal=ci)
                except AuthError as e:
                    assert e.reason == "quota_exceeded", e
                    assert "quota: principal 'ci' has 3 jobs queued or running (limit 3)" in str(e)
                    return False
                return True

            submits = (submit(f"j{round_}-{n}", s) for n, s in enumerate(picked))
            accepted = await asyncio.gather(*submits)
            assert sum(accepted) == 3, (round_, accepted)
            assert await store.count_unfinished("ci") == 3
            for job in await store.list_jobs():  # room again for the next round
                await store.request_cancel(job.id)
    finally:
        await other_host.close()


async def test_a_job_id_is_resubmitted_harmlessly_by_its_own_submitter_only(store: Store) -> None:
    """sub1 resubmitting sub2's cancelled pr-42 with the same spec got sub2's job back."""
    jobs = await _service(store)
    job, created = await jobs.submit(TRUE, "m.toml", "pr-42", submitter="sub2")
    assert created and job.submitter == "sub2"
    await store.request_cancel("pr-42")
    with pytest.raises(JobConflict, match=r"^job id 'pr-42' belongs to another submitter$"):
        await jobs.submit(TRUE, "m.toml", "pr-42", submitter="sub1")
    again, created = await jobs.submit(TRUE, "m.toml", "pr-42", submitter="sub2")
    assert not created and again.submitter == "sub2"


async def test_parallel_first_jobs_of_a_new_lane_are_all_queued(store: Store) -> None:
    """Two transactions both found a new lane missing and both inserted it: on PostgreSQL the
    second failed with a unique violation, and its submission as "database unavailable"."""
    services = [await _service(store) for _ in range(8)]
    submits = (
        jobs.submit(TRUE, "m.toml", f"lane-{n}", submitter=f"sub{n}")
        for n, jobs in enumerate(services)
    )
    created = [created for _, created in await asyncio.gather(*submits)]
    assert created == [True] * 8
    assert len(await store.lanes()) == 1


async def test_a_boolean_or_a_string_is_not_taken_for_a_number(jobs: JobService) -> None:
    """`cpu = true` ran pinned to CPU 1, and `timeout_s = "60"` was taken for 60 though the
    submission's JSON Schema says a number: what is accepted is what the schema allows."""
    assert await refused(jobs, command=["true"], cpu=True) == [
        "m.toml: params.cpu: expected a number, not a boolean, got True"
    ]
    # exit 1 was taken for success; "1" is not a CPU either.
    assert await refused(jobs, command=["true"], ok_exit_codes=[0, True], cpu="1") == [
        "m.toml: params.ok_exit_codes.1: expected a number, not a boolean, got True",
        "m.toml: params.cpu: expected a number, not a string, got '1'",
    ]
    spec = {"suite": "s", "test": "t", "scenario": "command", "params": {"command": ["true"]}}
    for key, value in (("timeout_s", "60"), ("stable_effect", True), ("queue_timeout_s", "9")):
        with pytest.raises(InvalidSpec) as caught:
            await jobs.submit({**spec, key: value}, "m.toml")
        [problem] = caught.value.problems
        assert problem.startswith(f"m.toml: {key}: input should be a valid number"), problem

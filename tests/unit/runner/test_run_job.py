"""The runner's rules for one job, with the iterations kept in memory: what is recorded, in
what order, and what the job's outcome is."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from labd.errors import InfrastructureError
from labd.events import EventBus
from labd.model import Device, Job, JobState, TestSpec
from labd.runner import run_job
from labd.runner.variants import Slot, schedule
from tests.scripted_driver import ScriptedDriver, ScriptParams
from tests.unit.fakes import IterationMemory

DEVICE = Device(id="d1", driver="scripted", platform="scripted", host="h")


def spec_of(**fields: Any) -> TestSpec:
    return TestSpec.model_validate(
        {"suite": "s", "test": "t", "scenario": "script", "iterations": 3, "warmup": 0, **fields}
    )


async def run(tmp_path: Path, attempt: int = 1, **fields: Any) -> tuple[Any, IterationMemory]:
    spec = spec_of(**fields)
    job = Job(
        id="j", spec=spec, state=JobState.RUNNING, attempts=attempt, device_id="d1",
        submitted_at=datetime.now(UTC),
    )  # fmt: skip
    store = IterationMemory()
    params = ScriptParams.model_validate(spec.params)
    driver = ScriptedDriver(["d1"])
    outcome = await run_job(job, DEVICE, driver, params, store, EventBus(), tmp_path)
    return outcome, store


async def test_warm_ups_then_measured_values_are_recorded_in_order(tmp_path: Path) -> None:
    outcome, store = await run(tmp_path, warmup=1, params={"value": 10, "step": 1})
    assert outcome.state is JobState.SUCCEEDED
    assert [(i.index, i.warmup, i.values) for i in store.iterations] == [
        (0, True, {"value": 10.0}),
        (1, False, {"value": 11.0}),
        (2, False, {"value": 12.0}),
        (3, False, {"value": 13.0}),
    ]
    assert {(i.job_id, i.attempt, i.device_id) for i in store.iterations} == {("j", 1, "d1")}


async def test_a_failed_iteration_is_kept_with_its_error_and_fails_the_job(tmp_path: Path) -> None:
    outcome, store = await run(tmp_path, params={"fail_iteration": 1})
    assert outcome.state is JobState.FAILED
    assert outcome.error == "1 of 3 measured iterations failed; first: scripted failure"
    assert [i.error for i in store.iterations] == ["", "scripted failure", ""]  # it went on


async def test_a_device_failure_in_setup_is_left_to_the_scheduler(tmp_path: Path) -> None:
    with pytest.raises(InfrastructureError, match="attempt 1"):
        await run(tmp_path, params={"infra_failures": 1})
    outcome, store = await run(tmp_path, attempt=2, params={"infra_failures": 1})
    assert outcome.state is JobState.SUCCEEDED and len(store.iterations) == 3


def test_a_job_without_variants_runs_its_iterations_in_a_row() -> None:
    assert schedule(spec_of(warmup=2, iterations=2)) == [
        Slot("", True), Slot("", True), Slot("", False), Slot("", False),
    ]  # fmt: skip


def test_variants_alternate_in_blocks_warm_ups_first() -> None:
    ab = {"base": {}, "new": {}, "block": 2}
    order = [(s.variant, s.warmup) for s in schedule(spec_of(ab=ab, warmup=1, iterations=3))]
    assert order == [("base", True), ("new", True)] + [("base", False)] * 2 + [
        ("new", False)
    ] * 2 + [("base", False), ("new", False)]


def test_a_random_order_is_the_same_for_the_same_seed_and_balanced() -> None:
    def order(seed: int) -> list[str]:
        ab = {"base": {}, "new": {}, "order": "random", "seed": seed}
        return [s.variant for s in schedule(spec_of(ab=ab, iterations=20))]

    assert order(7) == order(7)
    assert order(7) != order(8)
    assert order(7).count("base") == order(7).count("new") == 20
    pairs = [order(7)[i : i + 2] for i in range(0, 40, 2)]
    assert all(sorted(pair) == ["base", "new"] for pair in pairs)

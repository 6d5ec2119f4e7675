"""The runner: conditions around every iteration, flags and set-aside, retries, interleaved
A/B jobs, the fingerprint and the job's PERFHERDER_DATA line (a real SQLite store)."""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict
from structlog.testing import capture_logs

from labd.config import MeasurementSettings, PerfherderSettings
from labd.errors import TestFailure
from labd.events import EventBus
from labd.model import Device, Job, JobState, MetricSpec, TestSpec
from labd.runner import run_job
from labd.runner.fingerprint import differences
from labd.scheduler import BaselineAnalyst
from labd.sdk import Driver, NoOptions, Scenario
from labd.store import Store, results_view

DEVICE = Device(id="d1", driver="cond", platform="cond", model="Rig 1")
SCHEMA = json.loads(
    (Path(__file__).parents[2] / "data/treeherder/performance-artifact.json").read_text()
)


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: float = 100.0
    drift: float = 0.0  # added per iteration, whatever the variant
    timeouts: list[int] = []  # iterations that flag themselves as a time-out would
    notes: int = 0  # notes each even iteration leaves (what it left out)
    setup_fails: bool = False  # its setup applies a setting, then fails as the test's own
    reports: list[dict[str, Any]] = []  # when given: what each iteration reports, as it is
    huge_integer_at: int = -1  # that iteration reports 10**5000 (no JSON spec can hold it)
    returns: str = ""  # "none" or "list": what every iteration returns instead of a dict


class Steady(Scenario):
    name = "steady"
    Params = Params
    default_metrics = (MetricSpec(name="time_ms", unit="ms"),)

    applied: ClassVar[list[str]] = []  # what setups applied and teardowns have not undone

    async def setup(self) -> None:
        self.ctx.fingerprint["stabilisation"] = {"governor": "performance"}
        self.applied.append(self.ctx.job_id)
        if self.params.setup_fails:
            raise TestFailure("battery still at 35.2 °C, above this job's limit of 25 °C")

    async def teardown(self) -> None:
        self.applied.remove(self.ctx.job_id)

    async def run_iteration(self, index: int) -> dict[str, float]:
        p = self.params
        assert isinstance(p, Params)
        if index % 2 == 0:
            self.ctx.notes += [f"mark {n} left out" for n in range(p.notes)]
        if index in p.timeouts:
            self.ctx.flags.append("timed out after 1 s (the run was killed)")
        if index == p.huge_integer_at:
            return {"time_ms": 10**5000}  # type: ignore[dict-item]
        if p.returns:
            return {"none": None, "list": [("time_ms", 1.0)]}[p.returns]  # type: ignore[return-value]
        if p.reports:
            return p.reports[index % len(p.reports)]
        noise = (index % 3) * 0.1  # a little spread, the same for both variants
        return {"time_ms": p.value + p.drift * index + noise}


class RigDriver(Driver):
    """A device whose thermal-throttle counter rises during the iterations listed."""

    name = "cond"
    platform = "cond"

    def __init__(self, throttled: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__(NoOptions(), "h")
        self.readings = 0
        self.throttled = throttled
        self.count = 0

    async def discover(self) -> list[Device]:
        return [DEVICE]

    def scenarios(self) -> Mapping[str, type[Scenario]]:
        return {"steady": Steady}

    async def conditions(self, device: Device) -> dict[str, Any]:
        iteration, after = divmod(self.readings, 2)
        self.readings += 1
        if after and iteration in self.throttled:
            self.count += 3
        return {"load_1m": 0.1, "cpus": 2, "governor": "performance", "throttle_count": self.count}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}")
    yield opened
    await opened.close()


async def run(
    store: Store, tmp_path: Path, driver: RigDriver, job_id: str = "j1", **spec: Any
) -> tuple[Job, Any, dict[str, Any]]:
    settings = {k: spec.pop(k) for k in ("measurement", "perfherder") if k in spec}
    full = TestSpec.model_validate({"suite": "s", "test": "t", "scenario": "steady",
                                    "iterations": 6, "warmup": 0, **spec})  # fmt: skip
    job, _ = await store.submit_job(job_id, full, "me")
    job = job.model_copy(update={"attempts": 1, "device_id": "d1"})
    params = Params.model_validate(full.params)
    outcome = await run_job(job, DEVICE, driver, params, store, EventBus(), tmp_path / job_id,
                            **settings)  # fmt: skip
    return job, outcome, await results_view(store, job)


async def test_a_throttled_iteration_is_flagged_set_aside_and_counted(
    store: Store, tmp_path: Path
) -> None:
    _, outcome, results = await run(store, tmp_path, RigDriver(throttled={2}))
    assert outcome.state is JobState.SUCCEEDED
    third = results["iterations"][2]
    assert third["flags"] == ["the CPUs were thermally throttled 3 times during it"]
    assert third["set_aside"] is True
    assert third["fingerprint"]["conditions"]["before"]["throttle_count"] == 0
    assert third["fingerprint"]["conditions"]["after"]["throttle_count"] == 3
    assert results["summary"]["time_ms"]["n"] == 5  # never averaged with the rest
    assert results["set_aside"] == {
        "count": 1, "by_variant": {"job": 1},
        "reasons": {"the CPUs were thermally throttled 3 times during it": 1},
    }  # fmt: skip


async def test_a_stop_when_stable_job_that_runs_to_its_cap_says_why(
    store: Store, tmp_path: Path
) -> None:
    """It ran to its cap in silence, and read as one that had stopped when stable (a tester's
    find)."""
    with capture_logs() as logs:
        _, outcome, results = await run(
            store, tmp_path, RigDriver(), iterations=18, stop_when_stable=True,
            params={"drift": 5.0},
        )  # fmt: skip
    assert outcome.state is JobState.SUCCEEDED and len(results["iterations"]) == 18
    (said,) = [e for e in logs if e["event"] == "not stable at the cap"]
    assert said["log_level"] == "warning" and said["measured"] == 18
    assert said["metrics"]["time_ms"].startswith("interval +-")


async def test_what_an_iteration_left_out_is_noted_in_it_not_flagged(
    store: Store, tmp_path: Path
) -> None:
    """A launch whose marks were left out (a name no metric can have, a clock jump) reported
    nothing of them in its job: its notes are kept in its fingerprint, its values stand."""
    _, outcome, results = await run(store, tmp_path, RigDriver(), params={"notes": 25})
    assert outcome.state is JobState.SUCCEEDED
    notes = [it["fingerprint"].get("notes") for it in results["iterations"]]
    kept = [f"mark {n} left out" for n in range(20)] + ["and 5 more"]
    assert notes == [kept, None] * 3  # each iteration's own, not the one's before it
    assert not any(it["flags"] for it in results["iterations"])
    assert results["summary"]["time_ms"]["n"] == 6


async def test_a_set_up_that_fails_as_the_tests_own_fails_the_job_torn_down(
    store: Store, tmp_path: Path
) -> None:
    """A phone that did not cool under the job's own limit: its TestFailure in setup reached
    the scheduler as a driver bug, was retried, counted against the phone and quarantined it,
    and the setup's airplane mode and governors were never undone (no teardown after a
    failed setup). It fails the job, nothing held against the device, and is torn down."""
    _, outcome, _ = await run(store, tmp_path, RigDriver(), params={"setup_fails": True})
    assert outcome.state is JobState.FAILED
    assert outcome.error == (
        "set-up failed on d1: battery still at 35.2 °C, above this job's limit of 25 °C"
    )
    assert Steady.applied == []  # torn down


async def test_a_set_aside_iteration_is_retried_when_configured(
    store: Store, tmp_path: Path
) -> None:
    policy = MeasurementSettings(retry_flagged=2)
    _, outcome, results = await run(store, tmp_path, RigDriver(throttled={1, 4}),
                                    measurement=policy)  # fmt: skip
    assert outcome.state is JobState.SUCCEEDED
    assert len(results["iterations"]) == 8 and results["summary"]["time_ms"]["n"] == 6


async def test_flagged_values_can_be_kept_in_summaries_still_flagged(
    store: Store, tmp_path: Path
) -> None:
    policy = MeasurementSettings(set_aside_flagged=False)
    _, _, results = await run(store, tmp_path, RigDriver(), params={"timeouts": [0]},
                              measurement=policy)  # fmt: skip
    assert results["iterations"][0]["flags"] == ["timed out after 1 s (the run was killed)"]
    assert results["summary"]["time_ms"]["n"] == 6 and results["set_aside"]["count"] == 0


async def test_a_job_whose_every_value_was_set_aside_fails_saying_why(
    store: Store, tmp_path: Path
) -> None:
    _, outcome, _ = await run(store, tmp_path, RigDriver(), params={"timeouts": list(range(6))})
    assert outcome.state is JobState.FAILED
    assert outcome.error == (
        "every measured iteration (6) was set aside; first: timed out after 1 s "
        "(the run was killed)"
    )


async def test_a_job_with_more_values_set_aside_than_kept_fails_saying_why(
    store: Store, tmp_path: Path
) -> None:
    """A program that hangs 4 runs in 6 (an independent tester's 5 in 8): the job succeeded on
    its quick ones, whose median went to the history and Perfherder with no mark of the rest.
    Half set aside still stands."""
    _, outcome, _ = await run(store, tmp_path, RigDriver(), params={"timeouts": [0, 2, 3, 5]})
    assert outcome.state is JobState.FAILED
    assert outcome.error == (
        "4 of 6 measured iterations were set aside, more than were kept: the 2 kept cannot "
        "stand for the test; first: timed out after 1 s (the run was killed)"
    )
    _, half, _ = await run(store, tmp_path, RigDriver(), "j2", params={"timeouts": [0, 2, 4]})
    assert half.state is JobState.SUCCEEDED


async def test_an_ab_job_interleaves_its_variants_and_its_comparison_is_the_result(
    store: Store, tmp_path: Path
) -> None:
    ab = {"base": {"params": {"value": 100}}, "new": {"params": {"value": 110}}}
    job, outcome, results = await run(store, tmp_path, RigDriver(), ab=ab, warmup=1)
    assert outcome.state is JobState.SUCCEEDED
    order = [(i["variant"], i["warmup"]) for i in results["iterations"]]
    assert order == [("base", True), ("new", True)] + [("base", False), ("new", False)] * 6
    summary = results["summary"]["time_ms"]
    assert summary["verdict"] == "regression" and summary["ratio"] == pytest.approx(1.1, 0.01)
    assert summary["base"]["n"] == summary["new"]["n"] == 6
    bus = EventBus()
    alerts = await BaselineAnalyst(store, bus).compare_variants(
        job.model_copy(update={"state": JobState.SUCCEEDED})
    )
    assert [(a.metric, a.verdict, a.baseline_job_id) for a in alerts] == [
        ("time_ms", "regression", job.id)
    ]


async def test_the_job_log_holds_a_valid_perfherder_line(store: Store, tmp_path: Path) -> None:
    await run(store, tmp_path, RigDriver(), perfherder=PerfherderSettings(framework="rig"),
              build={"revision": "abc123"})  # fmt: skip
    (line,) = (tmp_path / "j1" / "job.log").read_text().splitlines()
    data = json.loads(line.removeprefix("PERFHERDER_DATA: "))
    jsonschema.validate(data, SCHEMA)
    assert data["framework"] == {"name": "rig"}
    assert "abc123" not in json.dumps(data["suites"][0]["extraOptions"])


@pytest.mark.parametrize("left", ["link", "fifo", "hard link", "own file"])
async def test_what_a_program_leaves_at_job_log_is_replaced_never_written_through(
    store: Store, tmp_path: Path, left: str
) -> None:
    """Independent testers' finds: a program (its folder is its own) left `job.log` as a
    link to a root-only file, and labd, as root, appended its line there; as a named pipe,
    and the write waited for a reader until the job timed out; as a file of its own with a
    PERFHERDER_DATA line of its making, which a log parser read before labd's."""
    victim = tmp_path / "victim"
    victim.write_text("ROOT-ONLY\n")
    folder = tmp_path / "j1"
    folder.mkdir()
    if left == "link":
        (folder / "job.log").symlink_to(victim)
    elif left == "fifo":
        os.mkfifo(folder / "job.log")
    elif left == "hard link":
        os.link(victim, folder / "job.log")
    else:
        (folder / "job.log").write_text('fake\nPERFHERDER_DATA: {"framework": {}}\n')
    _, outcome, _ = await asyncio.wait_for(
        run(store, tmp_path, RigDriver(), perfherder=PerfherderSettings(framework="rig")), 30
    )
    assert outcome.state is JobState.SUCCEEDED
    assert victim.read_text() == "ROOT-ONLY\n"
    (line,) = (folder / "job.log").read_text().splitlines()  # labd's line alone
    jsonschema.validate(json.loads(line.removeprefix("PERFHERDER_DATA: ")), SCHEMA)
    assert sorted(p.name for p in folder.iterdir()) == ["job.log"]  # no file left beside it


async def test_the_fingerprint_holds_the_build_and_a_stable_conditions_hash(
    store: Store, tmp_path: Path
) -> None:
    _, _, one = await run(store, tmp_path, RigDriver(), "j1", build={"revision": "r1"})
    _, _, two = await run(store, tmp_path, RigDriver(), "j2", build={"revision": "r2"})
    a, b = one["iterations"][0]["fingerprint"], two["iterations"][0]["fingerprint"]
    assert a["build"]["revision"] == "r1" and a["model"] == "Rig 1"
    assert a["conditions_hash"] == b["conditions_hash"]  # the build is what is tested
    b["stabilisation"] = {"governor": "powersave"}
    assert differences(a, b) == [
        'stabilisation: {"governor": "performance"} -> {"governor": "powersave"}'
    ]


async def test_a_value_that_is_no_finite_number_fails_its_iteration_and_is_never_stored(
    store: Store, tmp_path: Path
) -> None:
    """NaN, infinities, 1e300 and booleans are no measurements: each fails its iteration as
    the scenario's test failure, naming metric, value and iteration; the rest is stored."""
    reports = [{"time_ms": math.nan, "rss_kib": 4.0}, {"time_ms": math.inf},
               {"time_ms": -math.inf}, {"time_ms": 1e300}, {"time_ms": True},
               {"time_ms": 0.0}, {"time_ms": 5.0}]  # fmt: skip
    params = {"reports": reports, "huge_integer_at": 5}
    _, outcome, results = await run(store, tmp_path, RigDriver(), params=params, iterations=7)
    assert outcome.state is JobState.FAILED
    assert outcome.error == (
        "6 of 7 measured iterations failed; first: metric time_ms: nan is not a finite number"
        " (iteration 0)"
    )
    assert [it["error"] for it in results["iterations"]] == [
        "metric time_ms: nan is not a finite number (iteration 0)",
        "metric time_ms: inf is not a finite number (iteration 1)",
        "metric time_ms: -inf is not a finite number (iteration 2)",
        "metric time_ms: 1e+300 is out of range: magnitudes from 1e-100 to 1e+100 (or 0)"
        " (iteration 3)",
        "metric time_ms: True is not a number (iteration 4)",
        # Python will not write it (4,300 digits at most): it was a driver bug, retried
        "metric time_ms: an integer of about 5,000 digits is out of range: magnitudes from 1e-100"
        " to 1e+100 (or 0) (iteration 5)",
        "",
    ]
    values = [it["values"] for it in results["iterations"]]
    assert values == [{"rss_kib": 4.0}, {}, {}, {}, {}, {}, {"time_ms": 5.0}]
    assert results["summary"]["time_ms"]["n"] == 1
    json.dumps(results, allow_nan=False)  # nothing stored that strict JSON cannot hold


async def test_an_iteration_that_returns_no_dict_fails_saying_so_and_blames_no_device(
    store: Store, tmp_path: Path
) -> None:
    """It was `AttributeError: 'NoneType' object has no attribute 'items'`: a plugin author
    could not tell that the return value was wrong. Then a driver bug, which a plugin tester
    saw quarantine every healthy device the scenario ran on: it is the scenario's code, so it
    fails the iteration as a bad value does."""
    for returned, kind in (("none", "NoneType"), ("list", "list")):
        _, outcome, results = await run(
            store, tmp_path, RigDriver(), job_id=returned, params={"returns": returned}
        )
        assert outcome.state is JobState.FAILED
        errors = {it["error"] for it in results["iterations"]}
        assert errors == {f"run_iteration returned {kind}, not a dict of metric values"}


async def test_a_metric_named_as_no_manifest_may_name_one_fails_its_iteration(
    store: Store, tmp_path: Path
) -> None:
    """A plugin tester's scenario reported metrics named "", `a/b#c`, `sp ace` and one of
    5,000 characters: all were stored and summarised, and reached topics and tables."""
    reports = [{"": 1.0}, {"a/b#c": 1.0, "ok_ms": 2.0}, {"sp ace": 1.0}, {"x" * 5000: 1.0},
               {"load/first_paint:ms-2": 3.0}]  # fmt: skip
    params = {"reports": reports}
    _, _, results = await run(store, tmp_path, RigDriver(), params=params, iterations=5)
    rule = "is not one: letters, digits and _ . : / -, at most 128 characters"
    errors = [it["error"] for it in results["iterations"]]
    assert errors[:3] == [f"metric name '' {rule} (iteration 0)",
                          f"metric name 'a/b#c' {rule} (iteration 1)",
                          f"metric name 'sp ace' {rule} (iteration 2)"]  # fmt: skip
    assert errors[3].startswith("metric name 'xxxx") and errors[3].endswith(f"{rule} (iteration 3)")
    assert errors[4] == ""
    values = [it["values"] for it in results["iterations"]]
    assert values == [{}, {"ok_ms": 2.0}, {}, {}, {"load/first_paint:ms-2": 3.0}]

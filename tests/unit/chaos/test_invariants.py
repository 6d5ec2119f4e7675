"""The chaos checker finds each kind of violation in a made-up history (and none in a clean
one), so a green campaign means something."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from benchmarks.chaos.invariants import Verdict, check
from benchmarks.chaos.lab import Received
from labd.model import Iteration, Job, JobState, TestSpec

SPEC = TestSpec(suite="s", test="t", scenario="sim", iterations=2, warmup=0)


def job(job_id: str, state: JobState = JobState.SUCCEEDED, attempts: int = 1) -> Job:
    return Job(
        id=job_id, spec=SPEC, state=state, attempts=attempts, submitted_at=datetime.now(UTC)
    )


def it(job_id: str, attempt: int, index: int, start: float, device: str = "d1") -> Iteration:
    return Iteration(
        job_id=job_id, attempt=attempt, index=index, warmup=False,
        values={"index": float(index)}, device_id=device,
        started_at=datetime.fromtimestamp(start, UTC),
        finished_at=datetime.fromtimestamp(start + 1, UTC),
    )  # fmt: skip


def ev(job_id: str, seq: int, kind: str, at: float, **data: Any) -> Received:
    body = {"job_id": job_id, "seq": seq, "kind": kind, "time": at, "host": "h", "data": data}
    return Received(at, f"labd/v1/x/jobs/{job_id}/events", body)


def clean_history(job_id: str = "j", device: str = "d1", t: float = 100) -> list[Received]:
    return [
        ev(job_id, 1, "queued", t),
        ev(job_id, 2, "leased", t + 1, device_id=device, attempt=1),
        ev(job_id, 3, "running", t + 1),
        ev(job_id, 4, "finished", t + 4),
    ]


def violations(verdicts: list[Verdict]) -> dict[str, int]:
    return {v.name: v.violations for v in verdicts if v.violations}


def run(jobs: list[Job], its: list[Iteration], seqs: dict[str, int], msgs: list[Received],
        statuses: dict[str, str] | None = None) -> dict[str, int]:  # fmt: skip
    by_job: dict[str, list[Iteration]] = {}
    for i in its:
        by_job.setdefault(i.job_id, []).append(i)
    return violations(check(jobs, by_job, seqs, msgs, statuses or {"h": "online"}, ["h"]))


def test_a_clean_history_has_no_violation() -> None:
    assert (
        run([job("j")], [it("j", 1, 0, 101), it("j", 1, 1, 102)], {"j": 4}, clean_history()) == {}
    )


def test_each_kind_of_violation_is_counted() -> None:
    history = clean_history()
    history.append(ev("j", 6, "finished", 105))  # a second end, and seq 5 never arrived
    overlapping = [
        it("j", 1, 0, 101), it("j", 1, 1, 102),
        it("j", 2, 0, 101.5, device="d2"),  # a second host ran attempt 2 meanwhile
    ]  # fmt: skip
    found = run([job("j", attempts=2)], overlapping, {"j": 6}, history, {"h": "offline"})
    assert found["every job ends exactly once"] == 1
    assert found["no job ran on two hosts at overlapping times"] == 1
    assert found["no raw value lost"] == 1
    assert found["event sequence numbers complete per job"] == 1
    assert found["every host's status topic right at the end"] == 1


def test_a_value_written_from_a_device_that_did_not_hold_the_lease_is_counted() -> None:
    its = [it("j", 1, 0, 101), it("j", 1, 1, 102, device="d9")]
    assert run([job("j")], its, {"j": 4}, clean_history()) == {
        "no raw value duplicated across attempts": 1
    }


def test_a_device_leased_twice_at_once_is_counted() -> None:
    history = clean_history("a", "d1", 100) + clean_history("b", "d1", 102)
    its = [it(j, 1, n, 101) for j in "ab" for n in (0, 1)]
    assert run([job("a"), job("b")], its, {"a": 4, "b": 4}, history) == {
        "no device leased twice at once": 1
    }


def test_a_job_that_never_ended_is_counted() -> None:
    assert run([job("j", JobState.RUNNING)], [], {"j": 3}, clean_history()[:3]) == {
        "every job ends exactly once": 1
    }


def test_a_refunded_lease_heard_late_does_not_count_against_the_host_that_ran_the_attempt() -> None:
    # d1's host was killed between its claim and the run: restarted, it gave the attempt back
    # uncounted, d2 ran attempt 1, and d1's old "leased" event reached the broker last.
    history = [
        ev("j", 1, "queued", 100),
        ev("j", 4, "leased", 110, device_id="d2", attempt=1),
        ev("j", 5, "running", 110),
        ev("j", 6, "finished", 114),
        ev("j", 2, "leased", 101, device_id="d1", attempt=1),
        ev("j", 3, "requeued", 109, attempt=1),
    ]
    its = [it("j", 1, 0, 111, device="d2"), it("j", 1, 1, 112, device="d2")]
    assert run([job("j")], its, {"j": 6}, history) == {}

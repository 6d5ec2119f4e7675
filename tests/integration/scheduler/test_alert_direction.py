"""The baseline alert reads a metric's direction as the scenario declared it: a frame rate
that fell by a third was published as an improvement when the manifest did not list it."""

from __future__ import annotations

from datetime import UTC, datetime

from labd.events import EventBus
from labd.model import DeviceSelector, Iteration, JobState, MetricSpec, TestSpec
from labd.scheduler.alerts import BaselineAnalyst
from labd.store import Store, lane_key

SELECTOR = DeviceSelector(platform="host")
FPS = {"fps": {"unit": "fps", "higher_is_better": True}}  # what the runner records


async def run(store: Store, job_id: str, fps: float, metrics: list[MetricSpec]) -> None:
    spec = TestSpec(suite="s", test="t", scenario="command", params={"command": ["true"]},
                    device=SELECTOR, metrics=metrics)  # fmt: skip
    await store.submit_job(job_id, spec, "ci")
    lease = await store.claim_job("d1", [lane_key(SELECTOR, "command")], "host-a", 30)
    assert lease is not None and lease.job.id == job_id
    await store.mark_running(job_id, lease.token)
    now = datetime.now(UTC)
    for index in range(12):
        value = fps + (index % 3) * 0.1
        await store.add_iteration(
            Iteration(job_id=job_id, attempt=1, index=index, warmup=False,
                      values={"fps": value}, started_at=now, finished_at=now, device_id="d1",
                      fingerprint={"metrics": FPS}),
            lease.token,
        )  # fmt: skip
    await store.finish_job(job_id, lease.token, JobState.SUCCEEDED)


async def test_a_fall_in_a_scenario_declared_frame_rate_is_alerted_as_a_regression(
    store: Store,
) -> None:
    unit_only = [MetricSpec(name="fps", unit="frames/s")]  # direction left to the scenario
    await run(store, "base", 60.0, unit_only)
    await run(store, "new", 40.0, unit_only)
    base, new = await store.get_job("base"), await store.get_job("new")
    assert base is not None and new is not None
    (change,) = await BaselineAnalyst(store, EventBus()).compare(base, new)
    assert (change.metric, change.verdict) == ("fps", "regression")

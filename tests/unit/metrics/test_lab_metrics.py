"""What the daemon's metrics make of the events they hear, with the store in memory (read
only when an event does not carry the news)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from labd.config import MetricsSettings, PoolSettings
from labd.events import (
    DeviceChanged,
    EventBus,
    IterationDone,
    JobFinished,
    JobLeased,
    JobQueued,
)
from labd.metrics import LabMetrics
from labd.model import Job, JobState, TestSpec
from labd.pool import Pool
from tests.unit.fakes import JobMemory

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def metrics_on(store: JobMemory) -> tuple[LabMetrics, CollectorRegistry]:
    registry, bus = CollectorRegistry(), EventBus()
    pool = Pool({}, {}, store, bus, PoolSettings(), "h")  # type: ignore[arg-type]  # a fake store
    lab = LabMetrics(registry, bus, store, pool, MetricsSettings())  # type: ignore[arg-type]
    return lab, registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def at(seconds: float) -> dict[str, Any]:
    return {"time": T0 + timedelta(seconds=seconds)}


async def test_the_wait_for_a_device_comes_from_the_queued_event_without_a_read() -> None:
    store = JobMemory()
    lab, registry = metrics_on(store)
    queued = JobQueued(job_id="j", suite="s", test="t", submitter="ci", priority=5, **at(0))
    await lab.on_event(queued)
    await lab.on_event(JobLeased(job_id="j", device_id="d", host="h", attempt=1, **at(12)))
    assert value(registry, "labd_job_wait_seconds_sum", priority="high") == 12
    assert store.reads == []


async def test_a_job_queued_through_another_host_is_read_from_the_store() -> None:
    spec = TestSpec(suite="s", test="t", scenario="x", priority=-1)
    store = JobMemory([Job(id="j", spec=spec, state=JobState.LEASED, submitted_at=T0)])
    lab, registry = metrics_on(store)
    await lab.on_event(JobLeased(job_id="j", device_id="d", host="h", attempt=1, **at(30)))
    assert value(registry, "labd_job_wait_seconds_sum", priority="low") == 30
    assert store.reads == ["j"]


async def test_a_finished_job_counts_by_state_with_its_time_since_the_lease() -> None:
    lab, registry = metrics_on(JobMemory())
    await lab.on_event(JobLeased(job_id="j", device_id="d", host="h", attempt=1, **at(0)))
    await lab.on_event(
        JobFinished(job_id="j", state="failed", error="x", suite="s", test="t", device_id="d",
                    **at(95))
    )  # fmt: skip
    assert value(registry, "labd_jobs_finished_total", state="failed") == 1
    assert value(registry, "labd_job_duration_seconds_sum", state="failed") == 95


async def test_iterations_count_by_result_and_quarantines_by_platform() -> None:
    lab, registry = metrics_on(JobMemory())
    for error in ("", "", "timed out"):
        await lab.on_event(
            IterationDone(job_id="j", device_id="d", attempt=1, index=0, warmup=False,
                          values={}, error=error, duration_s=2.0)
        )  # fmt: skip
    await lab.on_event(
        IterationDone(job_id="j", device_id="d", attempt=1, index=1, warmup=False,
                      values={"v": 9.0}, error="", duration_s=1.0, set_aside=True)
    )  # fmt: skip
    assert value(registry, "labd_iterations_total", result="ok") == 2
    assert value(registry, "labd_iterations_total", result="set_aside") == 1
    assert value(registry, "labd_iterations_total", result="failed") == 1
    assert value(registry, "labd_iteration_duration_seconds_sum") == 7.0
    await lab.on_event(
        DeviceChanged(device_id="p", host="h", platform="android", state="quarantined",
                      admin="enabled", reason="3 failures")
    )  # fmt: skip
    await lab.on_event(
        DeviceChanged(device_id="p", host="h", platform="android", state="available",
                      admin="enabled", reason="")
    )  # fmt: skip
    assert value(registry, "labd_quarantines_total", platform="android") == 1

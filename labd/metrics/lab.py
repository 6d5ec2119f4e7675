"""The lab's metrics: counters and histograms fed by events as they happen, and gauges from a
snapshot of the store and the pool taken every few seconds (scrapes never touch the database,
and the numbers stay true across restarts because the store is the truth).

Names follow Prometheus conventions: base units in the name, `_total` on counters, labels with
bounded values (states, platforms, priority classes; result series only when allow-listed).
"""

from __future__ import annotations

import asyncio
import fnmatch
import statistics
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from labd.config import MetricsSettings
from labd.events import (
    ChangeFound,
    DeviceChanged,
    DevicePowerCycled,
    Event,
    EventBus,
    HealthCheckFailed,
    IterationDone,
    JobFinished,
    JobLeased,
    JobQueued,
    dispatch,
)
from labd.metrics.fleet import FleetRole
from labd.model import TERMINAL, DeviceState, JobState
from labd.pool import Pool
from labd.store import Store, measured
from labd.tasks import Failures, TaskSet

log = structlog.get_logger("labd.metrics")
QUEUED_KEPT = 10_000  # queued jobs remembered for their wait until leased

PRIORITY_CLASSES = ("high", "normal", "low")
VERDICTS = ("regression", "improvement")
JOB_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400)
ITERATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


def priority_class(priority: int) -> str:
    return "high" if priority > 0 else "low" if priority < 0 else "normal"


class SnapshotCollector(Collector):
    """Renders the latest snapshot (plain data, replaced whole: safe to read from a thread)."""

    def __init__(self, mqtt_connected: Callable[[], bool] | None = None) -> None:
        self.snapshot: dict[str, Any] = {}
        # Read at each scrape, not from the snapshot: the link's state must not lag /readyz.
        self.mqtt_connected = mqtt_connected

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.snapshot
        if not snap:
            return
        exporter = GaugeMetricFamily(
            "labd_fleet_exporter",
            "1 on the one host of the lab that exports the lab-wide gauges (labd_jobs, "
            "labd_queue_*), 0 on the others.",
        )
        exporter.add_metric([], int(snap["fleet"]))
        yield exporter
        yield from self._hosts(snap)
        if snap["fleet"]:
            yield from self._fleet(snap)

    def _fleet(self, snap: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
        """Gauges of the whole lab, from the shared database: exported by one host only."""
        jobs = GaugeMetricFamily(
            "labd_jobs",
            "Jobs in the lab by state (one host of the lab exports it).",
            labels=["state"],
        )
        # Every label set, 0 included: a panel shows 0 on a quiet lab, not "No data".
        counts = {state.value: 0 for state in JobState} | snap["jobs"]
        for state, count in sorted(counts.items()):
            jobs.add_metric([state], count)
        depth = GaugeMetricFamily(
            "labd_queue_depth",
            "Queued jobs in the lab by priority class (one host of the lab exports it).",
            labels=["priority"],
        )
        oldest = GaugeMetricFamily(
            "labd_queue_oldest_wait_seconds",
            "How long the lab's oldest queued job has waited, by priority class (one host of "
            "the lab exports it).",
            labels=["priority"],
        )
        queue = {cls: (0, 0.0) for cls in PRIORITY_CLASSES} | snap["queue"]
        for cls, (count, wait) in sorted(queue.items()):
            depth.add_metric([cls], count)
            oldest.add_metric([cls], wait)
        yield from (jobs, depth, oldest)

    def _hosts(self, snap: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
        """Gauges of this host alone."""
        devices = GaugeMetricFamily(
            "labd_devices",
            "This host's devices by state and platform.",
            labels=["state", "platform"],
        )
        every = {(s.value, p): 0 for s in DeviceState for p in snap["platforms"]}
        for (state, platform), count in sorted((every | snap["devices"]).items()):
            devices.add_metric([state, platform], count)
        connected = GaugeMetricFamily(
            "labd_mqtt_connected", "1 while the MQTT bridge is connected to its broker."
        )
        connected.add_metric([], int(self.mqtt_connected()) if self.mqtt_connected else 0)
        backlog = GaugeMetricFamily(
            "labd_outbox_backlog", "Messages waiting in this host's outbox."
        )
        backlog.add_metric([], snap["outbox"])
        yield from (devices, connected, backlog)


class LabMetrics:
    """A component: subscribes to events and refreshes the snapshot."""

    name = "metrics"

    def __init__(
        self,
        registry: CollectorRegistry,
        bus: EventBus,
        store: Store,
        pool: Pool,
        settings: MetricsSettings,
        mqtt_connected: Callable[[], bool] | None = None,
    ) -> None:
        self.bus, self.store, self.pool, self.settings = bus, store, pool, settings
        r = registry
        self.jobs_finished = Counter(
            "labd_jobs_finished", "Jobs that reached an end, by state.", ["state"], registry=r
        )
        self.job_duration = Histogram(
            "labd_job_duration_seconds",
            "From lease to the end of a job, by its end state.",
            ["state"],
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.job_wait = Histogram(
            "labd_job_wait_seconds",
            "From submission to lease, by priority class.",
            ["priority"],
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.iterations = Counter(
            "labd_iterations",
            "Iterations run, by result (ok, set_aside, failed).",
            ["result"],
            registry=r,
        )
        self.iteration_duration = Histogram(
            "labd_iteration_duration_seconds",
            "Duration of one iteration.",
            buckets=ITERATION_BUCKETS,
            registry=r,
        )
        self.health_failures = Counter(
            "labd_health_check_failures",
            "Failed device health checks, by platform.",
            ["platform"],
            registry=r,
        )
        self.power_cycles = Counter(
            "labd_power_cycles", "Devices power-cycled after failing health checks.", registry=r
        )
        self.quarantines = Counter(
            "labd_quarantines",
            "Devices put into quarantine, by platform.",
            ["platform"],
            registry=r,
        )
        self.changes = Counter(
            "labd_changes_found",
            "Metrics of finished jobs that differ from their baseline, by verdict.",
            ["verdict"],
            registry=r,
        )
        self.latest = Gauge(
            "labd_latest_result",
            "Median of the latest succeeded job's measured iterations (allow-listed series).",
            ["suite", "test", "metric", "device_class"],
            registry=r,
        )
        self._initialise_label_sets()
        self.fleet = FleetRole(store)
        self.snapshot = SnapshotCollector(mqtt_connected)
        r.register(self.snapshot)
        self._leased_at: dict[str, float] = {}
        self._latest_series: set[tuple[str, ...]] = set()
        self._refused_logged = False
        # (when, priority) of jobs queued through this host, until leased: the wait without
        # a read of the store (a job queued elsewhere, or before a restart, is read).
        self._queued: dict[str, tuple[float, int]] = {}
        self._events = bus.subscribe("metrics")
        self._tasks = TaskSet("metrics")

    def platforms(self) -> list[str]:
        """The platforms of this host's drivers, whether or not a device is plugged in."""
        return sorted({driver.platform for driver in self.pool.drivers.values()})

    def _initialise_label_sets(self) -> None:
        """Every series a dashboard or an alert reads exists from the start at 0: a panel shows
        0 rather than "No data", and increase() sees the first increment (a counter whose
        series appears at 1 has no increase)."""
        for state in sorted(s.value for s in TERMINAL):
            self.jobs_finished.labels(state)
            self.job_duration.labels(state)
        for cls in PRIORITY_CLASSES:
            self.job_wait.labels(cls)
        for result in ("ok", "set_aside", "failed"):
            self.iterations.labels(result)
        for platform in self.platforms():
            self.health_failures.labels(platform)
            self.quarantines.labels(platform)
        for verdict in VERDICTS:
            self.changes.labels(verdict)

    async def start(self) -> None:
        await self.refresh()
        self._tasks.supervise("events", lambda: dispatch(self._events, self.on_event), self.bus)
        self._tasks.supervise("snapshot", self._refresh_loop, self.bus)

    async def stop(self, grace: float) -> None:
        self.bus.unsubscribe(self._events)
        await self._tasks.cancel_all()
        await self.fleet.release()

    async def _refresh_loop(self) -> None:
        failures = Failures("metrics snapshot", log)
        while True:
            await asyncio.sleep(self.settings.snapshot_interval_s)
            try:
                await self.refresh()
                failures.succeeded()
            except Exception as e:  # the store may be away for a moment; gauges keep the last
                failures.failed(e)

    async def refresh(self) -> None:
        """Count jobs, the queue, devices, the outbox and the broker link now."""
        now = self.store.clock.now()  # submission times are the lab's clock
        fleet = await self.fleet.held()
        queue: dict[str, tuple[int, float]] = {}
        for priority, count, oldest in await self.store.queue_by_priority() if fleet else []:
            cls = priority_class(priority)
            known = queue.get(cls, (0, 0.0))
            queue[cls] = (known[0] + count, max(known[1], now - oldest))
        devices = Tally((d.state.value, d.platform) for d in list(self.pool.devices.values()))
        self.snapshot.snapshot = {
            "fleet": fleet,
            "jobs": await self.store.count_jobs() if fleet else {},
            "queue": queue,
            "devices": dict(devices),
            "platforms": self.platforms(),
            "outbox": await self.store.outbox_depth(),
        }

    async def on_event(self, event: Event) -> None:
        if isinstance(event, JobQueued):
            self._queued[event.job_id] = (event.time.timestamp(), event.priority)
            if len(self._queued) > QUEUED_KEPT:  # leased by other hosts: forget the oldest
                self._queued.pop(next(iter(self._queued)))
        elif isinstance(event, JobLeased):
            self._leased_at[event.job_id] = event.time.timestamp()
            queued = self._queued.pop(event.job_id, None)
            if queued is None and (job := await self.store.get_job(event.job_id)) is not None:
                queued = (job.submitted_at.timestamp(), job.spec.priority)
            if queued is not None:
                wait = event.time.timestamp() - queued[0]
                self.job_wait.labels(priority_class(queued[1])).observe(max(wait, 0))
        elif isinstance(event, JobFinished):
            self.jobs_finished.labels(event.state).inc()
            if (leased := self._leased_at.pop(event.job_id, None)) is not None:
                duration = event.time.timestamp() - leased
                self.job_duration.labels(event.state).observe(duration)
            if event.state == "succeeded" and self._exported(event.suite, event.test):
                await self._latest(event)
        elif isinstance(event, IterationDone):
            result = "failed" if event.error else "set_aside" if event.set_aside else "ok"
            self.iterations.labels(result).inc()
            self.iteration_duration.observe(event.duration_s)
        elif isinstance(event, HealthCheckFailed):
            self.health_failures.labels(event.platform).inc()
        elif isinstance(event, DevicePowerCycled):
            self.power_cycles.inc()
        elif isinstance(event, DeviceChanged) and event.state == "quarantined":
            self.quarantines.labels(event.platform).inc()
        elif isinstance(event, ChangeFound):
            self.changes.labels(event.verdict).inc()

    def _exported(self, suite: str, test: str) -> bool:
        name = f"{suite}/{test}"
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.settings.result_series)

    async def _latest(self, event: JobFinished) -> None:
        job = await self.store.get_job(event.job_id)
        if job is None:
            return
        iterations = await self.store.iterations(job.id, attempt=job.attempts)
        if not iterations:
            return
        device_class = str(iterations[0].fingerprint.get("model") or job.device_id)
        for metric, values in measured(iterations).items():
            labels = (job.spec.suite, job.spec.test, metric, device_class)
            if labels not in self._latest_series:
                if len(self._latest_series) >= self.settings.max_result_series:
                    self._series_refused(labels)
                    continue
                self._latest_series.add(labels)
            self.latest.labels(*labels).set(statistics.median(values))

    def _series_refused(self, labels: tuple[str, ...]) -> None:
        if not self._refused_logged:  # once: the series count stays at the cap
            self._refused_logged = True
            log.warning(
                "labd_latest_result is at metrics.max_result_series: new series not exported",
                limit=self.settings.max_result_series,
                suite=labels[0],
                test=labels[1],
            )

"""Lab-wide gauges add up: with several hosts on one PostgreSQL, exactly one exports the jobs
and queue gauges, and another takes over when it goes."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from labd.config import MetricsSettings, PoolSettings
from labd.events import EventBus
from labd.metrics.lab import LabMetrics
from labd.model import DeviceSelector, TestSpec
from labd.pool import Pool
from labd.store import Store


def value(text: str, line_start: str) -> float:
    found = [
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)
    ]
    return sum(found)


async def host_metrics(url: str, host: str) -> tuple[Store, LabMetrics, CollectorRegistry]:
    store = await Store.open(url, host=host)
    bus = EventBus()
    pool = Pool({}, {}, store, bus, PoolSettings(), host)
    registry = CollectorRegistry()
    return store, LabMetrics(registry, bus, store, pool, MetricsSettings()), registry


async def test_queue_gauges_are_exported_by_one_host_and_taken_over(
    postgres_url: str, tmp_path: Path
) -> None:
    hosts = [await host_metrics(postgres_url, f"host-{n}") for n in range(3)]
    spec = TestSpec(suite="s", test="t", scenario="sim", device=DeviceSelector(platform="sim"))
    for n in range(4):
        await hosts[0][0].submit_job(f"j{n}", spec, "ci")
    try:
        texts = []
        for _, metrics, registry in hosts:
            await metrics.refresh()
            texts.append(generate_latest(registry).decode())
        # Summed across hosts, as a dashboard does: the lab's 4 queued jobs, not 12.
        assert sum(value(t, 'labd_queue_depth{priority="normal"}') for t in texts) == 4
        assert sum(value(t, 'labd_jobs{state="queued"}') for t in texts) == 4
        exporters = [value(t, "labd_fleet_exporter ") for t in texts]
        assert sorted(exporters) == [0, 0, 1]

        # The exporting host goes away: another one takes the role at its next snapshot.
        gone = exporters.index(1)
        await hosts[gone][1].stop(1)
        await hosts[gone][0].close()
        rest = [h for n, h in enumerate(hosts) if n != gone]
        texts = []
        for _, metrics, registry in rest:
            await metrics.refresh()
            texts.append(generate_latest(registry).decode())
        assert sum(value(t, 'labd_queue_depth{priority="normal"}') for t in texts) == 4
        assert sorted(value(t, "labd_fleet_exporter ") for t in texts) == [0, 1]
    finally:
        for n, (store, metrics, _) in enumerate(hosts):
            if n != locals().get("gone"):
                await metrics.stop(1)
                await store.close()

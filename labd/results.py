"""Views of stored results, shared by the local API and the MQTT bridge."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from labd.model import Iteration, Job
from labd.stats import summarize
from labd.store import Store


def measured(iterations: list[Iteration]) -> dict[str, list[float]]:
    """Per metric, in iteration order, the values of the measured iterations (warm-up and
    failed iterations left out): what every verdict is computed from."""
    values: dict[str, list[float]] = {}
    for it in iterations:
        if not it.warmup and not it.error:
            for name, value in it.values.items():
                values.setdefault(name, []).append(value)
    return dict(sorted(values.items()))


async def measured_values(store: Store, job: Job) -> dict[str, list[float]]:
    """`measured` for the job's last attempt."""
    return measured(await store.iterations(job.id, attempt=job.attempts))


async def summary_of(store: Store, job: Job) -> dict[str, dict[str, Any]]:
    """Per metric, the summary of the last attempt's measured iterations."""
    series = await measured_values(store, job)
    # numpy/scipy work (and scipy's first import, about a second) stays off the event loop.
    return await asyncio.to_thread(_summaries, series)


def _summaries(series: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    found = {name: summarize(values) for name, values in series.items()}
    return {name: stats.as_dict() for name, stats in found.items() if stats is not None}


async def results_view(store: Store, job: Job) -> dict[str, Any]:
    """Raw values of every attempt, and the summary of the last one."""
    iterations = await store.iterations(job.id)
    return {
        "job": job.model_dump(mode="json"),
        "summary": await summary_of(store, job),
        "iterations": [i.model_dump(mode="json") for i in iterations],
    }


async def history_view(store: Store, suite: str, test: str) -> dict[str, Any]:
    """A test's history: per (metric, device class) series, one value per succeeded job (the
    median of its measured iterations), oldest first; a build is named by its revision."""
    series: dict[str, dict[str, list[Any]]] = {}
    for job in await store.finished_jobs(suite, test):
        iterations = await store.iterations(job.id, attempt=job.attempts)
        values = measured(iterations)
        if not values:
            continue
        device_class = iterations[0].fingerprint.get("model") or job.device_id
        build = job.spec.build.revision or job.spec.build.build_id or job.id
        for metric, metric_values in values.items():
            entry = series.setdefault(
                f"{suite}/{test}/{metric}/{device_class}", {"builds": [], "values": [], "jobs": []}
            )
            entry["builds"].append(build)
            entry["values"].append(statistics.median(metric_values))
            entry["jobs"].append(job.id)
    return {"suite": suite, "test": test, "series": series}


def perfherder(results: dict[str, Any]) -> dict[str, Any]:
    """Perfherder's PERFHERDER_DATA for one job's results (as `results_view` gives them):
    one suite per job, one subtest per metric with its median and every replicate."""
    job = results["job"]
    spec = job["spec"]
    units = {m["name"]: m for m in spec.get("metrics", [])}
    replicates: dict[str, list[float]] = {}
    for it in results["iterations"]:
        if it["attempt"] == job["attempts"] and not it["warmup"] and not it["error"]:
            for name, value in it["values"].items():
                replicates.setdefault(name, []).append(value)
    subtests = [
        {
            "name": name,
            "value": statistics.median(values),
            "replicates": values,
            "unit": units.get(name, {}).get("unit", ""),
            "lowerIsBetter": not units.get(name, {}).get("higher_is_better", False),
        }
        for name, values in sorted(replicates.items())
    ]
    suite: dict[str, Any] = {
        "name": f"{spec['suite']}.{spec['test']}",
        "subtests": subtests,
        "extraOptions": [o for o in (job.get("device_id"), spec["build"].get("revision")) if o],
    }
    if subtests and all(s["value"] > 0 for s in subtests):
        suite["value"] = statistics.geometric_mean(s["value"] for s in subtests)
    return {"framework": {"name": "labd"}, "suites": [suite]}

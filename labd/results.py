"""Views of stored results, shared by the local API and the MQTT bridge."""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from labd.model import Job
from labd.stats import summarize
from labd.store import Store


async def summary_of(store: Store, job: Job) -> dict[str, dict[str, Any]]:
    """Per metric, the summary of the last attempt's measured, successful iterations."""
    measured = [
        i
        for i in await store.iterations(job.id, attempt=job.attempts)
        if not i.warmup and not i.error
    ]
    series = {
        name: [i.values[name] for i in measured if name in i.values]
        for name in sorted({name for i in measured for name in i.values})
    }
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
        measured = [
            i
            for i in await store.iterations(job.id, attempt=job.attempts)
            if not i.warmup and not i.error
        ]
        if not measured:
            continue
        device_class = measured[0].fingerprint.get("model") or job.device_id
        build = job.spec.build.revision or job.spec.build.build_id or job.id
        for metric in sorted({name for i in measured for name in i.values}):
            values = [i.values[metric] for i in measured if metric in i.values]
            entry = series.setdefault(
                f"{suite}/{test}/{metric}/{device_class}", {"builds": [], "values": [], "jobs": []}
            )
            entry["builds"].append(build)
            entry["values"].append(statistics.median(values))
            entry["jobs"].append(job.id)
    return {"suite": suite, "test": test, "series": series}

"""Views of stored results, shared by the local API and the MQTT bridge.

Summaries, comparisons and alerts use the measured iterations only: warm-ups, failed
iterations and iterations set aside (flagged: bad conditions, a time-out, a poor sync) are
left out, and every view says how many were set aside and why.
"""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections import Counter, OrderedDict
from datetime import UTC, datetime
from typing import Any

from labd.auth import redact_job
from labd.errors import UsageError
from labd.metric_specs import directions_of, metric_specs
from labd.model import Iteration, Job
from labd.store.store import Store
from labd.tasks import TaskSet


class RawValuesRemoved(UsageError):
    """A job's raw values are asked for after retention removed them (its summary stays)."""

    def __init__(self, job_id: str, removed: dict[str, Any]) -> None:
        super().__init__(
            f"job {job_id!r}: its raw values were removed on {removed['at']} by the database's "
            "retention ([store] raw_max_age_days); its summary and history point are kept"
        )


def measured(iterations: list[Iteration], variant: str = "") -> dict[str, list[float]]:
    """Per metric, in iteration order, the values of the measured iterations of one variant
    ("" for a job without variants): what every verdict is computed from."""
    values: dict[str, list[float]] = {}
    for it in iterations:
        if not it.warmup and not it.error and not it.set_aside and it.variant == variant:
            for name, value in it.values.items():
                values.setdefault(name, []).append(value)
    return dict(sorted(values.items()))


def set_aside(iterations: list[Iteration]) -> dict[str, Any]:
    """How many measured iterations were set aside, per variant, and the reasons counted."""
    aside = [it for it in iterations if it.set_aside and not it.warmup]
    by_variant = Counter(it.variant or "job" for it in aside)
    reasons = Counter(_reason_kind(flag) for it in aside for flag in it.flags)
    return {"count": len(aside), "by_variant": dict(by_variant), "reasons": dict(reasons)}


def _reason_kind(flag: str) -> str:
    """A flag without its numbers, so alike reasons are counted together."""
    return flag.split(":")[0].split(" (")[0] if ":" in flag or " (" in flag else flag


def job_metric_specs(job: Job, iterations: list[Iteration]) -> dict[str, dict[str, Any]]:
    """Each metric's unit and direction (labd.metric_specs) as these iterations recorded the
    scenario's, under the job's manifest."""
    manifest = [m.model_dump() for m in job.spec.metrics]
    return metric_specs(manifest, (it.fingerprint for it in iterations))


async def measured_values(
    store: Store, job: Job
) -> tuple[dict[str, list[float]], dict[str, dict[str, Any]]]:
    """`measured` for the job's last attempt, and its metrics' units and directions.
    RawValuesRemoved when retention removed them."""
    iterations = await store.iterations(job.id, attempt=job.attempts)
    if not iterations and (removed := await raw_values_removed(store, job)):
        raise RawValuesRemoved(job.id, removed)
    return measured(iterations), job_metric_specs(job, iterations)


async def summary_of(store: Store, job: Job) -> dict[str, dict[str, Any]]:
    """Per metric, the summary of the last attempt's measured iterations. For an A/B job,
    per metric: the base and new summaries and the comparison (its verdict is the job's
    result)."""
    summary: dict[str, dict[str, Any]] = (await digest_of(store, job))["summary"]
    return summary


async def digest_of(store: Store, job: Job) -> dict[str, Any]:
    """The last attempt's `summary` and what was `set_aside`.

    It reads every iteration of the job and summarises each metric, so callers asking at
    once share one computation, and a finished job's is kept (it cannot change). Reading,
    decoding and summarising all run off the event loop.
    """
    # Per store (a number never reused: an id() of a closed store or loop can come back for the
    # next one and serve another database's summary).
    key = (
        _STORES.setdefault(store, next(_STORE_SERIAL)),
        job.id,
        job.attempts,
        job.state.value,
        job.finished_at,
    )
    if (kept := _FINISHED.get(key)) is not None:
        _FINISHED.move_to_end(key)
        return kept
    running = _RUNNING.get(key)
    if running is None:
        running = _RUNNING[key] = _DIGESTS.spawn(f"digest {job.id}", _digest(store, job))
        running.add_done_callback(lambda _: _RUNNING.pop(key, None))
    digest = await asyncio.shield(running)
    if job.state.terminal:
        _FINISHED[key] = digest
        while len(_FINISHED) > FINISHED_KEPT:
            _FINISHED.popitem(last=False)
    return digest


FINISHED_KEPT = 256  # digests of finished jobs kept (a few hundred bytes per metric each)
_DigestKey = tuple[int, str, int, str, object]
_FINISHED: OrderedDict[_DigestKey, dict[str, Any]] = OrderedDict()
_RUNNING: dict[_DigestKey, asyncio.Task[dict[str, Any]]] = {}
_DIGESTS = TaskSet("results")  # the digests being computed, however many callers wait
_STORES: weakref.WeakKeyDictionary[Store, int] = weakref.WeakKeyDictionary()
_STORE_SERIAL = itertools.count()


async def _digest(store: Store, job: Job) -> dict[str, Any]:
    if job.state.terminal and (kept := await store.job_digest(job.id)) is not None:
        return {key: kept["digest"][key] for key in ("summary", "set_aside")}
    return await fresh_digest(store, job)


def removal(kept: dict[str, Any]) -> dict[str, Any]:
    """When retention removed a job's raw iterations, and how many (`Store.job_digest`)."""
    when = datetime.fromtimestamp(kept["removed_at"], UTC).isoformat(timespec="seconds")
    return {"at": when, "iterations": kept["iterations"]}


async def raw_values_removed(store: Store, job: Job) -> dict[str, Any] | None:
    """`removal` of the job's raw iterations; None for a job that has them or has not ended."""
    if not job.state.terminal or (kept := await store.job_digest(job.id)) is None:
        return None
    return removal(kept)


async def fresh_digest(store: Store, job: Job) -> dict[str, Any]:
    """`digest_of` computed from the job's raw iterations."""
    records = await store.attempt_records(job.id, job.attempts)

    def compute() -> dict[str, Any]:
        # numpy/scipy work (and scipy's first import, about a second) stays off the loop.
        return digest_from(job, [Iteration.model_validate(r) for r in records])

    return await asyncio.to_thread(compute)


def digest_from(job: Job, last: list[Iteration]) -> dict[str, Any]:
    """The `summary` and `set_aside` of the job's last attempt, given its iterations."""
    return {"summary": summaries(job, last), "set_aside": set_aside(last)}


def summaries(job: Job, iterations: list[Iteration]) -> dict[str, dict[str, Any]]:
    if job.spec.ab is None:
        return _summaries(measured(iterations))
    base, new = measured(iterations, "base"), measured(iterations, "new")
    out: dict[str, dict[str, Any]] = {}
    for result in compare_variants(job, iterations):
        comparison = result.as_dict()
        out[result.metric] = {
            "base": comparison.pop("base"),
            "new": comparison.pop("new"),
            **{k: v for k, v in comparison.items() if k != "diagnostics"},
        }
    for name in sorted((base.keys() | new.keys()) - out.keys()):  # in one variant only
        out[name] = {"base": _one(base.get(name)), "new": _one(new.get(name))}
    return out


def compare_variants(job: Job, iterations: list[Iteration]) -> list[Any]:
    """The A/B job's comparison of new against base, per metric both report."""
    from labd.stats import compare

    base, new = measured(iterations, "base"), measured(iterations, "new")
    directions = directions_of(job_metric_specs(job, iterations))
    shared = sorted(base.keys() & new.keys())
    return compare({m: (base[m], new[m], directions.get(m, False)) for m in shared})


def _one(values: list[float] | None) -> dict[str, Any] | None:
    from labd.stats import summarize  # SciPy: imported where the work runs, off the loop

    found = summarize(values) if values else None
    return found.as_dict() if found is not None else None


def _summaries(series: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    from labd.stats import summarize

    found = {name: summarize(values) for name, values in series.items()}
    return {name: stats.as_dict() for name, stats in found.items() if stats is not None}


RESULTS_PAGE = 1000  # iterations in a results page unless the caller asks for fewer
RESULTS_PAGE_MAX = 5000
HISTORY_PAGE = 500  # jobs (builds) in a history page unless the caller asks for fewer
HISTORY_PAGE_MAX = 10_000


async def results_page(
    store: Store, job: Job, offset: int = 0, limit: int = RESULTS_PAGE
) -> dict[str, Any]:
    """One page of a job's results, fit to show anyone: the job (secrets redacted), raw
    iterations `offset` to `offset + limit` over every attempt in order, `total` and the
    `next` offset (None on the last page); the first page (offset 0) also has the last
    attempt's `summary` and what was `set_aside`, and `raw_values_removed` (when, how many)
    where retention removed the iterations. `limit` is capped at RESULTS_PAGE_MAX."""
    limit = max(1, min(limit, RESULTS_PAGE_MAX))
    records, total = await store.iteration_records(job.id, offset, limit)
    page: dict[str, Any] = {"job": redact_job(job.model_dump(mode="json"))}
    if offset == 0:
        page |= await digest_of(store, job)
        if not total and (removed := await raw_values_removed(store, job)):
            page["raw_values_removed"] = removed
    end = offset + len(records)
    return page | {
        "iterations": records,
        "offset": offset,
        "total": total,
        "next": end if end < total else None,
    }


async def results_view(store: Store, job: Job) -> dict[str, Any]:
    """Raw values of every attempt, the summary of the last one, what was set aside: every
    page of `results_page` joined, for callers that need the whole job at once."""
    view = await results_page(store, job)
    while view["next"] is not None:
        more = await results_page(store, job, view["next"], RESULTS_PAGE_MAX)
        view["iterations"] += more["iterations"]
        view["next"] = more["next"]
    return view


async def history_page(
    store: Store, suite: str, test: str, limit: int = HISTORY_PAGE, before: str = ""
) -> dict[str, Any]:
    """A test's history: per (metric, device class) series, one value per succeeded job (the
    median of its measured iterations), oldest first, with the direction that is better (the
    newest job's, labd.metric_specs); a build is named by its revision. A/B
    jobs are comparisons within themselves and stay out of it. One page: the newest `limit`
    jobs older than job `before` (the newest when empty); `next` is the `before` of the next
    older page, None when there is none."""
    limit = max(1, min(limit, HISTORY_PAGE_MAX))
    points, older = await store.history_page(suite, test, limit, before)
    series: dict[str, dict[str, Any]] = {}
    for point in points:
        for metric, median in point.medians.items():
            entry = series.setdefault(
                f"{suite}/{test}/{metric}/{point.device_class}",
                {"builds": [], "values": [], "jobs": []},
            )
            entry["builds"].append(point.build)
            entry["values"].append(median)
            entry["jobs"].append(point.job_id)
            entry["higher_is_better"] = point.higher_is_better.get(metric, False)
    return {"suite": suite, "test": test, "series": series, "next": older}


async def history_view(store: Store, suite: str, test: str) -> dict[str, Any]:
    """The newest HISTORY_PAGE_MAX builds of a test's history (see `history_page`)."""
    return await history_page(store, suite, test, HISTORY_PAGE_MAX)

"""What a comparison says beside its verdicts, from two jobs' results as the store's views
give them: how many iterations each side set aside and why, and where the conditions differ."""

from __future__ import annotations

from typing import Any

from labd.errors import UsageError
from labd.metric_specs import directions_of, specs_of
from labd.model import Iteration
from labd.runner import differences
from labd.store import set_aside


def one_variant(results: dict[str, Any], variant: str, name: str) -> dict[str, Any]:
    """An A/B job's results narrowed to one variant, read as a job of its own."""
    if variant not in ("base", "new"):
        raise UsageError(f"{name}: expected JOB@base or JOB@new, not @{variant}")
    iterations = [
        {**it, "variant": ""} for it in results["iterations"] if it.get("variant") == variant
    ]
    # A whole of its own: the job's `total` counts both variants, and would read as a page.
    return {**results, "iterations": iterations, "total": len(iterations), "next": None}


def comparability(base: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """What `labd compare` says beside its verdicts: how many iterations each side set aside
    and why, and where the two runs' conditions differ (the fingerprint's comparable part)."""
    aside: dict[str, Any] = {}
    prints: dict[str, dict[str, Any]] = {}
    for side, results in (("base", base), ("new", new)):
        if results is None:
            continue
        attempt = results["job"]["attempts"]
        last = [Iteration.model_validate(i) for i in results["iterations"]
                if i["attempt"] == attempt]  # fmt: skip
        aside[side] = set_aside(last)
        measured_ones = [it for it in last if not it.warmup and not it.error]
        if measured_ones:
            prints[side] = measured_ones[0].fingerprint
    differ = differences(prints["base"], prints["new"]) if len(prints) == 2 else []
    if base is not None and new is not None:
        differ += _directions_differ(base, new)
    return {"set_aside": aside, "conditions_differ": differ}


def _directions_differ(base: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Metrics the two jobs read in opposite directions: every comparison takes the new
    job's (labd.metric_specs), and says so."""
    words = {True: "higher is better", False: "lower is better"}
    b, n = directions_of(specs_of(base)), directions_of(specs_of(new))
    return [
        f"direction of {name}: {words[b[name]]} -> {words[n[name]]} (the new job's is used)"
        for name in sorted(b.keys() & n.keys())
        if b[name] != n[name]
    ]

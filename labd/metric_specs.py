"""Each metric's unit and direction: the scenario's, as the runner records them in every
iteration's fingerprint, under the manifest's own [[metrics]] where those set them.

One rule for every reader (comparisons, reports, alerts, the console, the Perfherder export,
result files), so a higher-is-better metric the manifest does not list is never read as
lower-is-better by one of them. Plain data in, plain data out: result files use it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def metric_specs(
    manifest: Iterable[Mapping[str, Any]], fingerprints: Iterable[Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """{name: {"unit": str, "higher_is_better": bool}} from the job spec's `metrics` and its
    iterations' fingerprints."""
    found: dict[str, dict[str, Any]] = {}
    for fingerprint in fingerprints:
        recorded = (fingerprint or {}).get("metrics")
        for name, declared in recorded.items() if isinstance(recorded, Mapping) else ():
            if isinstance(declared, Mapping):
                found[name] = {
                    "unit": str(declared.get("unit") or ""),
                    "higher_is_better": declared.get("higher_is_better") is True,
                }
    for metric in manifest:
        entry = found.setdefault(metric["name"], {"unit": "", "higher_is_better": False})
        if metric.get("unit"):
            entry["unit"] = str(metric["unit"])
        if metric.get("higher_is_better") is not None:  # None: the scenario's
            entry["higher_is_better"] = metric["higher_is_better"] is True
    return found


def specs_of(results: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`metric_specs` of a job's results (as the API and `results_view` give them)."""
    fingerprints = (it.get("fingerprint") or {} for it in results.get("iterations") or [])
    return metric_specs(results["job"]["spec"].get("metrics") or [], fingerprints)


def units_of(results: Mapping[str, Any]) -> dict[str, str]:
    """Each metric's unit in a job's results, where one is known."""
    return {name: spec["unit"] for name, spec in specs_of(results).items() if spec["unit"]}


def directions_of(specs: Mapping[str, Mapping[str, Any]]) -> dict[str, bool]:
    """{name: higher_is_better} of `metric_specs`' answer."""
    return {name: bool(spec["higher_is_better"]) for name, spec in specs.items()}

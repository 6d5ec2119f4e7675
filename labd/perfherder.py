"""The `PERFHERDER_DATA:` export for Mozilla's Treeherder, valid against its performance
artifact schema (a test checks every export with jsonschema).

A series in Perfherder is keyed by framework, suite, test and extraOptions, so extraOptions
hold only what defines a series (the device class, the network profile, the lab's own
options) and never what changes per revision. Each metric is a subtest with its unit from the
scenario's metric specs; a suite value (the subtests' geometric mean, as Talos summarises a
suite, without its shift by 1 that lets a 0 in: here every value is positive) is given only
when every subtest shares one unit and direction. An A/B job exports its new variant.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

from labd.config import PerfherderSettings
from labd.errors import UsageError
from labd.metric_specs import metric_specs
from labd.model import PERFHERDER_MAX_UNIT

MAX_OPTION = 100  # Treeherder's limits
MAX_NAME = 80  # a suite's and a subtest's name (PerformanceSignature's suite and test fields)
MAX_UNIT = PERFHERDER_MAX_UNIT  # MetricSpec refuses a longer unit at submit
MAX_OPTIONS = 8
MAX_VALUE = 1e12


def perfherder(results: dict[str, Any], settings: PerfherderSettings) -> dict[str, Any]:
    """The PERFHERDER_DATA payload of one job's results (as `results_view` gives them)."""
    job = results["job"]
    spec = job["spec"]
    variant = "new" if spec.get("ab") else ""
    last = [
        it
        for it in results["iterations"]
        if it["attempt"] == job["attempts"] and it.get("variant", "") == variant
    ]
    replicates: dict[str, list[float]] = {}
    for it in last:
        if not it["warmup"] and not it["error"] and not it.get("set_aside"):
            for name, value in it["values"].items():
                replicates.setdefault(name, []).append(value)
    specs = metric_specs(spec.get("metrics", []), (it.get("fingerprint", {}) for it in last))
    suite_title = _name("the suite", suite_name(spec["suite"], spec["test"]))
    subtests: list[dict[str, Any]] = []
    for name, values in sorted(replicates.items()):
        _name(f"metric {name!r}: its name", name)
        unit = specs.get(name, {}).get("unit") or ""
        if not unit:
            raise UsageError(
                f"metric {name!r} has no unit: give it one in the manifest's [[metrics]]"
            )
        if len(unit) > MAX_UNIT:
            # Never cut: a cut unit is another unit (and one submitted before the limit was
            # checked at submit time still reaches here).
            raise UsageError(
                f"metric {name!r} has the unit {unit!r}, over Perfherder's {MAX_UNIT} characters"
            )
        checked = [_within(name, v) for v in values]
        subtests.append(
            {
                "name": name,
                "value": statistics.median(checked),  # within the replicates' range
                "replicates": checked,
                "unit": unit,
                "lowerIsBetter": not specs.get(name, {}).get("higher_is_better", False),
            }
        )
    suite: dict[str, Any] = {
        "name": suite_title,
        "subtests": subtests,
        "extraOptions": _options(last, settings),
    }
    units = {s["unit"] for s in subtests}
    directions = {s["lowerIsBetter"] for s in subtests}
    if len(units) == 1 and len(directions) == 1 and all(s["value"] > 0 for s in subtests):
        values = [s["value"] for s in subtests]
        # Exact where it can be: the mean of logs gave 6.999999999999999 for one subtest of 7.
        same = len(set(values)) == 1
        suite["value"] = values[0] if same else statistics.geometric_mean(values)
        suite["unit"] = units.pop()
        suite["lowerIsBetter"] = directions.pop()
    data: dict[str, Any] = {"framework": {"name": settings.framework}, "suites": [suite]}
    if settings.application:
        data["application"] = {"name": settings.application}
        if version := _version(last):
            data["application"]["version"] = version
    return data


def perfherder_line(payload: dict[str, Any]) -> str:
    """The log line Treeherder's log parser picks up, of a payload `perfherder` made."""
    return "PERFHERDER_DATA: " + json.dumps(payload, sort_keys=True)


def suite_name(suite: str, test: str) -> str:
    """The Perfherder suite of a labd (suite, test): `<suite>.<test>`, or `<suite>/<test>` when
    the suite's name holds a dot. Joined with a dot alone, suite `numbers.x` and test `y` and
    suite `numbers` and test `x.y` were one series, `numbers.x.y`; `/` is in no labd name, so
    every pair keeps a name of its own, and a name without `/` splits at its first dot."""
    return f"{suite}/{test}" if "." in suite else f"{suite}.{test}"


def _options(iterations: list[dict[str, Any]], settings: PerfherderSettings) -> list[str]:
    """The suite's extraOptions: the device class, the network profile, the configured ones.
    They name the series, so one Perfherder would not take is refused, never cut: two cut
    to the same 100 characters were one series (as were options past the 8th, dropped)."""
    fingerprint = iterations[0].get("fingerprint", {}) if iterations else {}
    named = [
        ("the device model", fingerprint.get("model", "")),
        # As labd.runner.network_fingerprint writes it: the profile's fields, its name included.
        ("the network profile", str((fingerprint.get("network") or {}).get("name", ""))),
        *(("[perfherder] extra_options entry", option) for option in settings.extra_options),
    ]
    # In order, each once (the schema wants unique items); a blank one names nothing.
    options = dict.fromkeys(_option(source, o) for source, o in named if o and o.strip())
    if len(options) > MAX_OPTIONS:
        raise UsageError(
            f"{len(options)} extraOptions ({', '.join(map(repr, options))}) are over the"
            f" {MAX_OPTIONS} Perfherder takes; nothing exported: list fewer in [perfherder]"
            " extra_options"
        )
    return list(options)


def _name(what: str, name: str) -> str:
    """`name` as Treeherder stores a suite's or a subtest's, or UsageError: a longer one is
    refused by its database (the schema does not say so), and a cut one names another series."""
    if len(name) > MAX_NAME:
        raise UsageError(
            f"{what} {name!r} is {len(name)} characters, over the {MAX_NAME} Treeherder stores;"
            " nothing exported: give the job a shorter suite and test or the metric a shorter name"
        )
    return name


def _option(source: str, option: str) -> str:
    """`option` as an extraOptions entry, or UsageError naming where it came from."""
    entry = option.strip()
    if len(entry) > MAX_OPTION:
        raise UsageError(
            f"{source} {entry!r} is {len(entry)} characters, over the {MAX_OPTION} Perfherder"
            " takes in extraOptions; nothing exported"
        )
    return entry


def _version(iterations: list[dict[str, Any]]) -> str:
    for it in iterations:
        version = (it.get("fingerprint", {}).get("browser") or {}).get("version", "")
        if version and not version.startswith("unknown"):
            return str(version)[:40]
    return ""


def _within(metric: str, value: Any) -> float:
    """`value` as the schema takes it. Never clamped: a clamped 1e300 (or a NaN, which min()
    turned into 1e12) would be a fabricated number that passes the schema."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"metric {metric!r}: {value!r} is not a number; Perfherder takes numbers")
    if not math.isfinite(value):
        raise UsageError(f"metric {metric!r}: {value} is not a finite number; nothing exported")
    if not -MAX_VALUE <= value <= MAX_VALUE:
        raise UsageError(
            f"metric {metric!r}: {value:g} is outside Perfherder's range (magnitudes up to"
            f" {MAX_VALUE:g}); nothing exported: give the metric another unit"
        )
    return value

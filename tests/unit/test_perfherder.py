"""The Perfherder export: every payload is checked against Treeherder's own schema."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from labd.config import PerfherderSettings
from labd.errors import UsageError
from labd.model import STORED, MetricSpec, NetworkSpec, TestSpec
from labd.perfherder import perfherder, perfherder_line
from labd.runner import network_fingerprint

SCHEMA = json.loads(
    (Path(__file__).parents[1] / "data/treeherder/performance-artifact.json").read_text()
)


def valid(data: dict[str, Any]) -> dict[str, Any]:
    """The export, after Treeherder's schema accepted it (as its log parser does)."""
    jsonschema.validate(data, SCHEMA)
    return data


UNITS = {"load_ms": {"unit": "ms"}, "fps": {"unit": "fps", "higher_is_better": True},
         "rss_kib": {"unit": "KiB"}}  # fmt: skip


def it(attempt: int, index: int, value: float, **extra: Any) -> dict[str, Any]:
    return {
        "attempt": attempt,
        "index": index,
        "warmup": extra.pop("warmup", False),
        "error": extra.pop("error", ""),
        "set_aside": extra.pop("set_aside", False),
        "variant": extra.pop("variant", ""),
        "values": extra.pop("values", {"load_ms": value, "fps": 60.0}),
        "fingerprint": {
            "model": "Pixel 7",
            "metrics": UNITS,
            # What the runner writes, not a hand-made copy that could drift from it.
            "network": extra.pop(
                "network", network_fingerprint(NetworkSpec(archive="ok.har", profile="3g"))
            ),
        },
    }


def results(revision: str, iterations: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "job": {
            "attempts": 2,
            "device_id": "pixel-7-serial-123",
            "spec": {"suite": "web", "test": "news", "build": {"revision": revision},
                     "metrics": [], **spec},
        },
        "iterations": iterations,
    }  # fmt: skip


def test_export_is_valid_keeps_every_replicate_of_the_last_attempt_and_sets_units() -> None:
    data = valid(
        perfherder(
            results("abc", [it(1, 0, 999), it(2, 0, 500, warmup=True), it(2, 1, 100),
                            it(2, 2, 110, error="crash"), it(2, 3, 120),
                            it(2, 4, 5000, set_aside=True)]),
            PerfherderSettings(),
        )
    )  # fmt: skip
    (suite,) = data["suites"]
    assert data["framework"] == {"name": "labd"}
    load = next(s for s in suite["subtests"] if s["name"] == "load_ms")
    assert load == {"name": "load_ms", "value": 110.0, "replicates": [100, 120], "unit": "ms",
                    "lowerIsBetter": True}  # fmt: skip
    fps = next(s for s in suite["subtests"] if s["name"] == "fps")
    assert fps["unit"] == "fps" and fps["lowerIsBetter"] is False


def test_the_series_does_not_change_with_the_revision_or_the_device_serial() -> None:
    one = perfherder(results("abc", [it(1, 0, 1), it(2, 0, 2)]), PerfherderSettings())
    two = perfherder(results("def", [it(2, 0, 3)]), PerfherderSettings())
    options = valid(one)["suites"][0]["extraOptions"]
    assert options == valid(two)["suites"][0]["extraOptions"] == ["Pixel 7", "3g"]
    assert one["suites"][0]["name"] == two["suites"][0]["name"] == "web.news"


def test_no_suite_value_across_differing_units_one_when_they_agree() -> None:
    mixed = valid(perfherder(results("a", [it(2, 0, 100)]), PerfherderSettings()))
    assert "value" not in mixed["suites"][0] and "unit" not in mixed["suites"][0]
    same = [it(2, 0, 0, values={"load_ms": 100.0, "paint_ms": 400.0})]
    same[0]["fingerprint"]["metrics"] = {"load_ms": {"unit": "ms"}, "paint_ms": {"unit": "ms"}}
    suite = valid(perfherder(results("a", same), PerfherderSettings()))["suites"][0]
    assert suite["value"] == pytest.approx(200.0) and suite["unit"] == "ms"
    assert suite["lowerIsBetter"] is True
    # One subtest, or all alike: its value exactly (the mean of logs gave 6.999999999999999
    # for 7, a tester's find: that figure went into the Treeherder series).
    lone = [it(2, 0, 0, values={"load_ms": 7.0})]
    one = valid(perfherder(results("a", lone), PerfherderSettings()))["suites"][0]
    alike = [it(2, 0, 0, values={"load_ms": 7.0, "paint_ms": 7.0})]
    alike[0]["fingerprint"]["metrics"] = same[0]["fingerprint"]["metrics"]
    both = valid(perfherder(results("a", alike), PerfherderSettings()))["suites"][0]
    assert [s.get("value") for s in (one, both)] == [7.0, 7.0]


def test_framework_application_and_options_come_from_the_configuration() -> None:
    settings = PerfherderSettings(framework="browsertime", application="firefox",
                                  extra_options=["cold", "Pixel 7"])  # fmt: skip
    iterations = [it(2, 0, 1)]
    iterations[0]["fingerprint"]["browser"] = {"version": "Mozilla Firefox 128.5.1esr"}
    data = valid(perfherder(results("a", iterations), settings))
    assert data["framework"] == {"name": "browsertime"}
    assert data["application"] == {"name": "firefox", "version": "Mozilla Firefox 128.5.1esr"}
    assert data["suites"][0]["extraOptions"] == ["Pixel 7", "3g", "cold"]


def test_the_manifest_s_units_win_and_a_metric_without_any_unit_is_named() -> None:
    spec_metrics = [{"name": "load_ms", "unit": "s", "higher_is_better": False}]
    data = valid(perfherder(results("a", [it(2, 0, 1)], metrics=spec_metrics),
                            PerfherderSettings()))  # fmt: skip
    assert next(s for s in data["suites"][0]["subtests"] if s["name"] == "load_ms")["unit"] == "s"
    bare = [it(2, 0, 1, values={"mystery": 1.0})]
    with pytest.raises(UsageError, match="metric 'mystery' has no unit"):
        perfherder(results("a", bare), PerfherderSettings())


def test_an_ab_job_exports_its_new_variant() -> None:
    iterations = [it(2, 0, 100, variant="base"), it(2, 1, 200, variant="new")]
    data = valid(perfherder(results("a", iterations, ab={"base": {}, "new": {}}),
                            PerfherderSettings()))  # fmt: skip
    load = next(s for s in data["suites"][0]["subtests"] if s["name"] == "load_ms")
    assert load["replicates"] == [200]


def test_the_log_line_is_what_treeherder_s_parser_reads() -> None:
    line = perfherder_line(perfherder(results("a", [it(2, 0, 1)]), PerfherderSettings()))
    assert line.startswith("PERFHERDER_DATA: {")
    valid(json.loads(line.removeprefix("PERFHERDER_DATA: ")))


def test_the_network_profile_names_the_series_as_the_runner_records_it() -> None:
    lte = network_fingerprint(NetworkSpec(archive="ok.har", profile="lte"))
    ab = [it(2, 0, 100, variant="base", network=lte), it(2, 1, 200, variant="new", network=lte)]
    data = valid(perfherder(results("a", ab, ab={"base": {}, "new": {}}), PerfherderSettings()))
    assert data["suites"][0]["extraOptions"] == ["Pixel 7", "lte"]
    custom = network_fingerprint(NetworkSpec(archive="ok.har", profile="3g", latency_ms=50))
    data = valid(perfherder(results("a", [it(2, 0, 1, network=custom)]), PerfherderSettings()))
    assert data["suites"][0]["extraOptions"] == ["Pixel 7", "3g+custom"]
    live = valid(perfherder(results("a", [it(2, 0, 1, network=None)]), PerfherderSettings()))
    assert live["suites"][0]["extraOptions"] == ["Pixel 7"]  # no [network]: a series of its own


def test_a_unit_over_perfherder_s_limit_is_refused_at_submit_and_never_cut_at_export() -> None:
    limit = SCHEMA["definitions"]["subtest_schema"]["properties"]["unit"]["maxLength"]
    long = "</text><script>alert(1)//"
    assert len(long) > limit
    MetricSpec(name="load_ms", unit="u" * limit)
    with pytest.raises(ValueError, match=f"Perfherder .* at most {limit}"):
        MetricSpec(name="load_ms", unit=long)
    # A job stored before the limit was checked at submit is still read back, but its export
    # is refused rather than cut to another unit.
    spec = {"suite": "web", "test": "news", "scenario": "s",
            "metrics": [{"name": "load_ms", "unit": long}]}  # fmt: skip
    stored = TestSpec.model_validate(spec, context=STORED)
    metrics = [m.model_dump() for m in stored.metrics]
    with pytest.raises(UsageError, match=f"over Perfherder's {limit} characters"):
        perfherder(results("a", [it(2, 0, 1)], metrics=metrics), PerfherderSettings())


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (1e13, "1e+13 is outside Perfherder's range"),
        (-1e300, "-1e+300 is outside Perfherder's range"),
        (float("nan"), "nan is not a finite number"),
        (float("inf"), "inf is not a finite number"),
        (None, "None is not a number"),
    ],
)
def test_a_value_outside_the_schema_s_range_is_refused_never_clamped(
    value: float, named: str
) -> None:
    """A clamped value (1e300 as 1e12, a NaN as 1e12 through min()) is a fabricated number
    that passes the schema: the export names the metric and the value instead."""
    iterations = [it(2, 0, 100), it(2, 1, value)]  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=re.escape(f"metric 'load_ms': {named}")):
        perfherder(results("a", iterations), PerfherderSettings())


def test_values_at_the_schema_s_bounds_are_exported_as_they_are() -> None:
    data = valid(perfherder(results("a", [it(2, 0, 1e12), it(2, 1, -1e12), it(2, 2, 5)]),
                            PerfherderSettings()))  # fmt: skip
    load = next(s for s in data["suites"][0]["subtests"] if s["name"] == "load_ms")
    assert load["replicates"] == [1e12, -1e12, 5] and load["value"] == 5


@pytest.mark.parametrize(("suite", "test", "metric"), [("s" * 40, "t" * 40, None),
                                                       ("web", "news", "m" * 81)])  # fmt: skip
def test_a_name_longer_than_treeherder_stores_is_refused_naming_it(
    suite: str, test: str, metric: str | None
) -> None:
    """Treeherder's PerformanceSignature keeps a suite and a test (subtest) in 80 characters;
    a 257-character suite passed the schema and would have failed at its database."""
    values = {metric: 1.0} if metric else {"load_ms": 1.0}
    data = results("abc", [it(2, 0, 1, values=values)], suite=suite, test=test,
                   metrics=[{"name": metric or "load_ms", "unit": "ms"}])  # fmt: skip
    long = metric or f"{suite}.{test}"
    with pytest.raises(UsageError, match=f"{long!r} is {len(long)} characters, over the 80"):
        perfherder(data, PerfherderSettings())
    shorter = results("abc", [it(2, 0, 1, values={"load_ms": 1.0})], suite=suite[:40],
                      test=test[:38], metrics=[{"name": "load_ms", "unit": "ms"}])  # fmt: skip
    assert len(valid(perfherder(shorter, PerfherderSettings()))["suites"][0]["name"]) <= 80

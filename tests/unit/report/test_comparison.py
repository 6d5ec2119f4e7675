"""What a comparison says beside its verdicts, from two jobs' results: set-aside counts with
their reasons, the conditions that differ, and one side of an A/B job read as a job."""

from __future__ import annotations

import pytest

from labd.errors import UsageError
from labd.report import comparability, one_variant
from tests.unit.cli.test_compare_context import result

VALUES = [100.0, 101.0, 102.0]


def test_set_aside_iterations_are_counted_per_side_with_their_reasons() -> None:
    base, new = result("a", VALUES, "performance", 2), result("b", VALUES, "performance", 0)
    found = comparability(base, new)
    assert found["set_aside"]["base"] == {
        "count": 2,
        "by_variant": {"job": 2},
        "reasons": {"timed out after 5 s": 2},
    }
    assert found["set_aside"]["new"]["count"] == 0
    assert found["conditions_differ"] == []


def test_differing_conditions_are_named_and_a_missing_side_compares_nothing() -> None:
    base, new = result("a", VALUES, "performance", 0), result("b", VALUES, "powersave", 0)
    (difference,) = comparability(base, new)["conditions_differ"]
    assert difference == 'stabilisation: {"governor": "performance"} -> {"governor": "powersave"}'
    alone = comparability(base, None)
    assert alone["conditions_differ"] == [] and set(alone["set_aside"]) == {"base"}


def test_only_the_last_attempt_counts() -> None:
    base = result("a", VALUES, "performance", 2)
    base["job"]["attempts"] = 2
    for it in base["iterations"][:3]:
        it["attempt"] = 2  # the set-aside ones were the first attempt's
    assert comparability(base, None)["set_aside"]["base"]["count"] == 0


def test_one_side_of_an_ab_job_reads_as_a_job_of_its_own() -> None:
    job = result("ab", VALUES * 2, "performance", 0)
    for n, it in enumerate(job["iterations"]):
        it["variant"] = "base" if n < 3 else "new"
    new = one_variant(job, "new", "ab@new")
    assert [it["values"]["time_ms"] for it in new["iterations"]] == VALUES
    assert {it["variant"] for it in new["iterations"]} == {""}
    with pytest.raises(UsageError, match=r"ab@old: expected JOB@base or JOB@new, not @old"):
        one_variant(job, "old", "ab@old")


def test_a_table_shows_the_location_its_change_compares() -> None:
    """Welch's change is of the means: shown beside the medians, a tester saw medians rise
    11.68 -> 11.94 next to a change of -2.68%. The row shows the means, and says so."""
    from labd.report import comparison_rows
    from labd.stats import compare

    base = [10.0, 10.1, 10.2, 10.3, 14.0, 14.1, 14.2]  # median 10.3, mean 11.84
    new = [10.4, 10.5, 10.6, 10.7, 10.8, 10.9, 11.0]  # median 10.7, mean 10.7
    (welch,) = compare({"m": (base, new, False)}, method="welch")
    row = comparison_rows([welch], {})
    assert "<td>mean</td><td>11.84</td><td>10.7</td><td>-9.65%</td>" in row
    (ranks,) = compare({"m": (base, new, False)}, method="hodges-lehmann")
    assert "<td>median</td><td>10.3</td><td>10.7</td>" in comparison_rows([ranks], {})

"""The HTML report says how many iterations were set aside and when conditions differ; an
A/B job is reported as its two sides and their comparison."""

from __future__ import annotations

from labd.report.html import render
from labd.report.tables import environment
from tests.unit.cli.test_compare_context import result


def test_the_report_counts_what_was_set_aside_and_warns_of_differing_conditions() -> None:
    values = [100.0 + (i % 5) * 0.2 for i in range(20)]
    html = render(result("a", values, "performance", 3), result("b", values, "powersave", 0))
    assert "3 measured iterations were set aside" in html
    assert "3x timed out after 5 s" in html
    assert "The two runs' conditions differ" in html


def test_an_ab_job_is_reported_as_base_new_and_their_comparison() -> None:
    job = result("ab", [100.0 + i % 3 for i in range(20)], "performance", 0)
    for n, it in enumerate(job["iterations"]):
        it["variant"] = "base" if n % 2 == 0 else "new"
    job["job"]["spec"]["ab"] = {"base": {}, "new": {}}
    html = render(job)
    assert "Baseline: s/t" in html and "New: s/t" in html and "Comparison" in html


def test_one_value_is_reported_without_a_spread_and_as_too_few_to_diagnose() -> None:
    """A one-iteration job's report said `1.97 ± 0`, CoV 0.00% and "All values are identical"
    (with two values, "the values look trustworthy"): a certainty one run cannot give."""
    html = render(result("one", [1.97], "performance", 0))
    assert "<td>1.97 ± -</td><td>1.97 [-, -]</td><td>-</td>" in html
    assert "One value: too few to diagnose (the diagnostics need 3 or more)." in html
    assert "Only 2 values: too few" in render(result("two", [1.97, 2.01], "performance", 0))


def test_the_environment_reads_in_any_script_and_shows_a_bidi_override_as_its_escape() -> None:
    """A product named "ünï 🙂" read `\\u00fcn\\u00ef \\ud83d\\ude42` in the Environment table
    (JSON's ASCII escapes, a tester's find); a revision's bidi override would reorder it."""
    table = environment({"build": {"product": "ünï 🙂", "revision": "safe\u202eexe.txt"}})
    assert "ünï 🙂" in table and "\\u00fc" not in table
    assert "safe\\u202eexe.txt" in table and "\u202e" not in table

"""/metrics' artefact series: suites are named by submitters, so only the suites the admin
lists under [artefacts.suites] have series of their own, the rest summed as (other)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from labd.artefacts import SuiteUsage
from labd.metrics import ArtefactCollector
from labd.metrics.artefacts import OTHER
from labd.model import id_problem


def test_unlisted_suites_share_one_series_however_many_there_are() -> None:
    usage = {f"suite-{n}": SuiteUsage(bytes=10, jobs=1, removed_bytes=2) for n in range(500)}
    usage["browser"] = SuiteUsage(bytes=1000, jobs=3, removed_bytes=7)
    registry = CollectorRegistry()
    registry.register(ArtefactCollector(lambda: usage, lambda: {"browser", "quiet"}))

    def value(name: str, suite: str) -> float | None:
        return registry.get_sample_value(name, {"suite": suite})

    assert value("labd_artefacts_bytes", "browser") == 1000
    assert value("labd_artefacts_jobs", "browser") == 3
    assert value("labd_artefacts_removed_bytes_total", "browser") == 7
    assert value("labd_artefacts_bytes", "quiet") == 0  # listed, nothing yet: exported at 0
    assert value("labd_artefacts_bytes", OTHER) == 5000
    assert value("labd_artefacts_jobs", OTHER) == 500
    assert value("labd_artefacts_removed_bytes_total", OTHER) == 1000
    assert value("labd_artefacts_bytes", "suite-7") is None
    text = generate_latest(registry).decode()
    # 3 suites (browser, quiet, other) x 3 metrics: bounded by the configuration.
    assert text.count('suite="') == 3 * 3, text


def test_the_bucket_is_there_from_the_start_and_is_no_suite_name() -> None:
    registry = CollectorRegistry()
    registry.register(ArtefactCollector(dict, frozenset))
    assert registry.get_sample_value("labd_artefacts_bytes", {"suite": OTHER}) == 0
    assert id_problem(OTHER) is not None  # a submitter cannot name a suite "(other)"

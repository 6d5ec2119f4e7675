"""The database's retention, read from its tally at scrape time: what it removed, what it
could not, and whether its passes still succeed (a pass that fails again and again lets the
database grow without anyone noticing in the log)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from labd.store import Tally


class RetentionCollector(Collector):
    """`tally` gives the retention's running tally, or None while it is off (no series then:
    a lab that keeps everything has nothing to alert on)."""

    def __init__(self, tally: Callable[[], Tally | None]) -> None:
        self.tally = tally

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        tally = self.tally()
        if tally is None:
            return
        jobs = CounterMetricFamily(
            "labd_db_retention_jobs",
            "Jobs the database's retention handled since the start, by action: digested (raw "
            "iterations removed, the digest kept), removed (whole), skipped (no digest could "
            "be made: the raw values stay, the log says why).",
            labels=["action"],
        )
        jobs.add_metric(["digested"], tally.removed.raw_jobs)
        jobs.add_metric(["removed"], tally.removed.jobs)
        jobs.add_metric(["skipped"], tally.skipped)
        iterations = CounterMetricFamily(
            "labd_db_retention_iterations_removed",
            "Raw iterations the database's retention removed since the start.",
        )
        iterations.add_metric([], tally.removed.iterations)
        passes = CounterMetricFamily(
            "labd_db_retention_passes",
            "Retention passes since the start, by result (ok, failed).",
            labels=["result"],
        )
        passes.add_metric(["ok"], tally.passes_ok)
        passes.add_metric(["failed"], tally.passes_failed)
        failing = GaugeMetricFamily(
            "labd_db_retention_failing_passes",
            "Retention passes in a row that failed (0 once one succeeds).",
        )
        failing.add_metric([], tally.failing)
        last = GaugeMetricFamily(
            "labd_db_retention_last_success_timestamp_seconds",
            "Unix time the last retention pass ended without error (0 before the first).",
        )
        last.add_metric([], tally.last_success)
        yield from (jobs, iterations, passes, failing, last)

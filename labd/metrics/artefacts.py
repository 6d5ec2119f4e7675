"""Disk used by job artefacts, per suite, read from the keeper at scrape time.

Suites are named by submitters, so a label per suite would let them add series without end:
only the suites the admin lists under [artefacts.suites] have series of their own; every
other suite is summed into `suite="(other)"`, a value no suite name can take."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from labd.artefacts import SuiteUsage

OTHER = "(other)"  # not a name (labd.model.ids): never a suite's own label


class ArtefactCollector(Collector):
    """`usage` gives the keeper's latest figures (a mapping replaced whole, safe to read from
    the scrape's thread); `listed`, the suites configured under [artefacts.suites]. Each listed
    suite has its series, 0 included, and so has `(other)`, the sum of the rest: the label set
    is bounded by the configuration, whatever suites jobs name."""

    def __init__(
        self,
        usage: Callable[[], Mapping[str, SuiteUsage]],
        listed: Callable[[], Collection[str]],
    ) -> None:
        self.usage = usage
        self.listed = listed

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        disk = GaugeMetricFamily(
            "labd_artefacts_bytes",
            "Disk space the artefacts of jobs take on this host, by suite (as du counts it); "
            "suites not under [artefacts.suites] summed as (other).",
            labels=["suite"],
        )
        jobs = GaugeMetricFamily(
            "labd_artefacts_jobs",
            "Jobs with artefacts on this host, by suite; suites not under [artefacts.suites] "
            "summed as (other).",
            labels=["suite"],
        )
        removed = CounterMetricFamily(
            "labd_artefacts_removed_bytes",
            "Artefacts removed by the retention limits since the start, by suite; suites not "
            "under [artefacts.suites] summed as (other).",
            labels=["suite"],
        )
        listed = set(self.listed())
        totals = {suite: [0, 0, 0] for suite in [*sorted(listed), OTHER]}
        for suite, usage in self.usage().items():
            total = totals[suite if suite in listed else OTHER]
            total[0] += usage.bytes
            total[1] += usage.jobs
            total[2] += usage.removed_bytes
        for suite, (size, count, gone) in totals.items():
            disk.add_metric([suite], size)
            jobs.add_metric([suite], count)
            removed.add_metric([suite], gone)
        yield from (disk, jobs, removed)

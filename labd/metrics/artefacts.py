"""Disk used by job artefacts, per suite, read from the keeper at scrape time."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from labd.artefacts import SuiteUsage


class ArtefactCollector(Collector):
    """`usage` gives the keeper's latest figures (a mapping replaced whole, safe to read from
    the scrape's thread). Every suite configured under [artefacts.suites] or found on disk has
    its series, 0 included."""

    def __init__(self, usage: Callable[[], Mapping[str, SuiteUsage]]) -> None:
        self.usage = usage

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        disk = GaugeMetricFamily(
            "labd_artefacts_bytes",
            "Disk space the artefacts of jobs take on this host, by suite (as du counts it).",
            labels=["suite"],
        )
        jobs = GaugeMetricFamily(
            "labd_artefacts_jobs", "Jobs with artefacts on this host, by suite.", labels=["suite"]
        )
        removed = CounterMetricFamily(
            "labd_artefacts_removed_bytes",
            "Artefacts removed by the retention limits since the start, by suite.",
            labels=["suite"],
        )
        for suite, usage in sorted(self.usage().items()):
            disk.add_metric([suite], usage.bytes)
            jobs.add_metric([suite], usage.jobs)
            removed.add_metric([suite], usage.removed_bytes)
        yield from (disk, jobs, removed)

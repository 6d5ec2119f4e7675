"""The daemon's core metrics: build info, uptime, event-loop lag and the event bus."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from labd import __version__
from labd.events import EventBus

# Loop lag buckets from 1 ms: a healthy daemon lives in the first few.
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class EventBusCollector(Collector):
    """Reads the bus's own counters at scrape time, so publishing costs nothing extra."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        published = CounterMetricFamily(
            "labd_events_published", "Events published on the bus, by kind.", labels=["kind"]
        )
        for kind, count in sorted(self.bus.published.items()):
            published.add_metric([kind], count)
        dropped = CounterMetricFamily(
            "labd_events_dropped",
            "Events a subscriber lost because its queue was full.",
            labels=["subscriber"],
        )
        delivered = CounterMetricFamily(
            "labd_events_delivered", "Events a subscriber received.", labels=["subscriber"]
        )
        depth = GaugeMetricFamily(
            "labd_event_queue_depth",
            "Events waiting in a subscriber's queue.",
            labels=["subscriber"],
        )
        for stat in self.bus.stats():
            dropped.add_metric([stat.name], stat.dropped)
            delivered.add_metric([stat.name], stat.delivered)
            depth.add_metric([stat.name], stat.depth)
        yield from (published, dropped, delivered, depth)


class PluginCensus(Protocol):
    group: str

    def census(self) -> Counter[tuple[str, str]]: ...


class PluginCollector(Collector):
    """Each plugin group's plugins by state: a plugin refused or failed at start shows on a
    dashboard, not only in the log line of that start."""

    def __init__(self, groups: tuple[PluginCensus, ...]) -> None:
        self.groups = groups

    def collect(self) -> Iterator[GaugeMetricFamily]:
        plugins = GaugeMetricFamily(
            "labd_plugins",
            "Plugins (drivers; power controls, one per device) by state: running, failed "
            "(raised when started), refused (at registration), disabled (by the configuration).",
            labels=["group", "plugin", "state"],
        )
        for group in self.groups:
            for (plugin, state), count in sorted(group.census().items()):
                plugins.add_metric([group.group, plugin, state], count)
        yield plugins


class DaemonMetrics:
    """Owns the registry that /metrics renders."""

    def __init__(self, bus: EventBus, lab: str, host: str) -> None:
        self.registry = CollectorRegistry()
        started = time.time()
        Info("labd_build", "Version of the running labd.", registry=self.registry).info(
            {"version": __version__, "lab": lab, "host": host}
        )
        Gauge(
            "labd_start_time_seconds", "Unix time the daemon started.", registry=self.registry
        ).set(started)
        Gauge(
            "labd_uptime_seconds", "Seconds since the daemon started.", registry=self.registry
        ).set_function(lambda: time.time() - started)
        self.loop_lag = Histogram(
            "labd_event_loop_lag_seconds",
            "How late the event loop woke a sleeping task: time it was blocked.",
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(EventBusCollector(bus))

    def follow_clock(self, offset: Callable[[], float]) -> None:
        """Export the offset of the lab's clock (the database's) from this host's."""
        Gauge(
            "labd_clock_offset_seconds",
            "The database's clock less this host's (0 on SQLite): how far this host's clock is "
            "off the lab's, which leases and deadlines follow.",
            registry=self.registry,
        ).set_function(offset)

    def follow_plugins(self, *groups: PluginCensus) -> None:
        """Export the plugins of each group by state."""
        self.registry.register(PluginCollector(groups))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

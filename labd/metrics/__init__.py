"""Prometheus metrics of one daemon, in a registry of its own (several daemons can share a
process in tests). Components hand their numbers over; nothing here reaches into them."""

from labd.metrics.access import AccessMetrics
from labd.metrics.artefacts import ArtefactCollector
from labd.metrics.lab import LabMetrics
from labd.metrics.registry import DaemonMetrics
from labd.metrics.retention import RetentionCollector

__all__ = [
    "AccessMetrics",
    "ArtefactCollector",
    "DaemonMetrics",
    "LabMetrics",
    "RetentionCollector",
]

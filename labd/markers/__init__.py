"""Streaming parsers of performance marks: Raptor's logcat lines and Android's launch lines."""

from labd.markers.iterations import LIFECYCLE, Iteration, LaunchCollector
from labd.markers.raptor import Launch, Mark, parse_line

__all__ = ["LIFECYCLE", "Iteration", "Launch", "LaunchCollector", "Mark", "parse_line"]

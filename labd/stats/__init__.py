"""Statistics: pure functions on arrays of raw values. Nothing here knows about the store."""

from labd.stats.summary import Summary, summarize

__all__ = ["Summary", "summarize"]

"""A client asking for endless new URLs cannot grow the replay server's list of misses, nor
its summary, without end (10,000 of them took 80 MB of memory and an 80 MB summary line)."""

from __future__ import annotations

from labd.replay.replaying import MISS_TEXT, MISSES_KEPT, Stats


def test_misses_are_all_counted_and_a_bounded_number_listed() -> None:
    stats = Stats()
    for n in range(MISSES_KEPT + 500):
        stats.miss(f"GET http://site.test/{n}")
    stats.miss("GET http://site.test/0")  # listed already: counted there
    stats.miss("GET http://site.test/" + "x" * 100_000)
    summary = stats.summary()
    assert summary["missed"] == MISSES_KEPT + 502
    assert len(summary["misses"]) == MISSES_KEPT
    assert summary["misses"][0] == {"url": "GET http://site.test/0", "count": 2}
    assert summary["misses_not_listed"] == 501
    assert all(len(m["url"]) <= MISS_TEXT + 3 for m in summary["misses"])

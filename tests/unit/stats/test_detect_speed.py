"""The fifth round's speed-ups of `ets+rank+vote`: each leaves the alerts as they were."""

from __future__ import annotations

import math

import numpy as np

from labd.stats.alert import Alert, describe_change, sketch_change
from labd.stats.cusum import detect_cusum
from labd.stats.cycles import last_two_raised
from labd.stats.rankscan import blocks, scan_statistics
from labd.stats.vote import Taken, voted


def _history(seed: int, n: int = 400) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = 100 * (1 + rng.normal(0, 0.02, n))
    for start in rng.integers(40, n - 40, 4):
        x[start:] *= 1 + rng.choice([-1, 1]) * rng.uniform(0.02, 0.06)
    return x


def test_the_cusum_stopped_early_finds_every_alert_dated_up_to_its_stop() -> None:
    stopped_early = 0
    for seed in range(12):
        x = _history(seed)
        full = detect_cusum(x, clip=3.0, long_run=True, spread=True)
        for until in (60, 150, 250):
            part = detect_cusum(x, clip=3.0, long_run=True, spread=True, until=until)
            assert [a for a in part if a.index <= until] == [a for a in full if a.index <= until]
            stopped_early += len(part) < len(full)
    assert stopped_early > 0


def test_the_rank_scans_statistics_do_not_depend_on_its_blocks() -> None:
    x = _history(5, 700)
    for lo in (0, 37, 300):
        whole = scan_statistics(x, lo, lo, x.size, 30, 30, 4, 10)
        starts = blocks(lo, x.size)
        assert len(starts) > 1 and starts[0] == lo
        pieces = [
            scan_statistics(x, lo, a, b, 30, 30, 4, 10)
            for a, b in zip(starts, [*starts[1:], x.size], strict=True)
        ]
        assert np.array_equal(np.concatenate(pieces), whole)


def test_a_sketched_change_is_described_change_without_its_interval() -> None:
    x = _history(7)
    for start, index, end in ((0, 60, 80), (40, 120, 131), (100, 200, 260)):
        full = describe_change(x, start, index, end, end - 1, "rank")
        sketch = sketch_change(x, start, index, end, end - 1, "rank")
        assert (sketch.index, sketch.raised_at, sketch.direction, sketch.magnitude) == (
            full.index,
            full.raised_at,
            full.direction,
            full.magnitude,
        )
        assert math.isnan(sketch.confidence)


def test_the_votes_alerts_are_described_in_full() -> None:
    found = 0
    for seed in range(8):
        x = _history(seed)
        for alert in voted(x, [], 12):
            found += 1
            assert math.isfinite(alert.confidence) and math.isfinite(alert.magnitude_low)
    assert found > 0


def _random_alerts(rng: np.random.Generator, count: int) -> list[Alert]:
    alerts = []
    for _ in range(count):
        index = int(rng.integers(0, 2000))
        raised = index + int(rng.integers(0, 40))
        magnitude = float(rng.choice([-1, 1]) * rng.uniform(0.01, 0.05))
        method = str(rng.choice(["rank", "ets"]))
        alerts.append(
            Alert(index, raised, "up" if magnitude > 0 else "down", magnitude, 0, 0, 1, method)
        )
    return alerts


def test_the_taken_dates_answer_as_each_alert_compared_in_turn() -> None:
    rng = np.random.default_rng(2)
    for _ in range(50):
        taken = _random_alerts(rng, int(rng.integers(0, 30)))
        index = Taken(taken)
        for alert in _random_alerts(rng, 40):
            for gap in (0, 5, 12):
                slow = any(
                    abs(alert.index - b.index) <= gap or alert.index <= b.index <= alert.raised_at
                    for b in taken
                )
                assert index.holds(alert, gap) == slow


def test_the_cycle_guard_reads_the_last_two_alerts_raised_as_the_full_list_did() -> None:
    rng = np.random.default_rng(4)
    for _ in range(50):
        seen = sorted(_random_alerts(rng, int(rng.integers(0, 25))), key=lambda a: a.index)
        for by in rng.integers(0, 2100, 20):
            assert last_two_raised(seen, int(by)) == [a for a in seen if a.raised_at <= by][-2:]

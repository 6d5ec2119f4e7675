"""The fourth round: the cycle guard, and the vote of a sensitive rank scan with the CUSUM."""

from __future__ import annotations

import numpy as np

from labd.stats.alert import Alert
from labd.stats.cycles import cycle_filtered
from labd.stats.detection import detect
from labd.stats.rankscan import detect_rank_scan
from labd.stats.vote import voted


def _alert(index: int, raised_at: int, magnitude: float, method: str = "rank") -> Alert:
    direction = "up" if magnitude > 0 else "down"
    return Alert(index, raised_at, direction, magnitude, magnitude, magnitude, 0.99, method)


def test_a_third_alert_that_continues_a_cycle_is_dropped_and_the_first_two_stand() -> None:
    cycle = [_alert(40, 55, 0.01), _alert(80, 95, -0.011), _alert(118, 130, 0.009)]
    assert cycle_filtered(cycle) == cycle[:2]
    # and a fourth, though the third was not reported: the cycle goes on
    more = [*cycle, _alert(160, 171, -0.01)]
    assert cycle_filtered(more) == cycle[:2]


def test_reverts_steps_and_etss_alerts_are_not_a_cycle() -> None:
    revert = [_alert(40, 55, 0.01), _alert(52, 60, -0.01), _alert(64, 75, 0.01)]
    assert cycle_filtered(revert) == revert  # half periods under MIN_HALF builds: reverts
    uneven = [_alert(40, 55, 0.01), _alert(80, 95, -0.01), _alert(200, 215, 0.01)]
    assert cycle_filtered(uneven) == uneven  # a third at another pace is a change
    other_size = [_alert(40, 55, 0.01), _alert(80, 95, -0.01), _alert(120, 135, 0.03)]
    assert cycle_filtered(other_size) == other_size  # it does not return to the level
    steps = [
        _alert(40, 43, 0.08, "ets"),
        _alert(80, 83, -0.08, "ets"),
        _alert(120, 123, 0.08, "ets"),
    ]
    assert cycle_filtered(steps) == steps  # ETS raised each within a few builds


def test_the_vote_keeps_only_what_the_cusum_agrees_with_and_stays_online() -> None:
    """On pure noise the sensitive scan alone raised 27 alerts in 20 histories, the vote none;
    on a step of 1.5 noise deviations its alerts are raised no earlier than the scan's."""
    rng = np.random.default_rng(3)
    noise_scan = noise_vote = 0
    for _ in range(20):
        x = 100 * (1 + rng.normal(0, 0.03, 400))
        noise_scan += len(detect_rank_scan(x, threshold=2.75))
        noise_vote += len(voted(x, [], 12))
    assert noise_scan >= 10 and noise_vote <= 2
    x = 100 * (1 + rng.normal(0, 0.03, 300))
    x[150:] *= 1.045
    for alert in voted(x, [], 12):
        scan = [a for a in detect_rank_scan(x, threshold=2.75) if a.index == alert.index]
        assert scan and alert.raised_at >= scan[0].raised_at
    assert any(abs(a.index - 150) <= 5 for a in detect(x))

"""The rank scan: its statistic, and the small shifts it finds that the CUSUM could not."""

from __future__ import annotations

import numpy as np
from scipy import stats

from labd.stats.detection import detect
from labd.stats.rankscan import detect_rank_scan, scan_statistics


def test_the_scan_statistic_is_mann_whitney_for_every_split_and_block() -> None:
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=700), 1)  # ties too, as a timer's resolution gives
    lo, after, before = 17, 30, 30
    z = np.vstack(
        [scan_statistics(x, lo, f, min(700, f + 256), after, before, 4, 10) for f in (lo, 273, 529)]
    )
    for t in (40, 60, 272, 273, 300, 529, 699):
        for a in (4, 10, 30):
            s = t - a + 1
            b0 = max(lo, s - before)
            if s - b0 < 10:
                continue  # too few builds before the split: the scan leaves it at 0
            new, old = x[s : t + 1], x[b0:s]
            u = stats.mannwhitneyu(new, old).statistic  # ties count a half
            expected = (2 * u - new.size * old.size) / np.sqrt(
                new.size * old.size * (new.size + old.size + 1) / 3
            )
            assert (
                z[t - lo, a - 1] == np.float64(expected) or abs(z[t - lo, a - 1] - expected) < 1e-9
            )


def test_a_shift_of_one_and_a_half_noise_deviations_is_found_and_dated() -> None:
    """In 3% noise a 4.5% step: the first round's default (ETS and a CUSUM whose allowance is
    1.1 deviations a build) found 18 of 40 within 5 builds; the rank scan adds the evidence up."""
    found = 0
    for seed in range(40):
        x = 100 * (1 + np.random.default_rng(seed).normal(0, 0.03, 250))
        x[120:] *= 1.045
        found += any(abs(a.index - 120) <= 5 and a.direction == "up" for a in detect(x))
    assert found >= 30


def test_the_scan_stays_quiet_until_it_has_seen_the_history_s_noise() -> None:
    """Daily and weekly cycles make the statistic stray: the scan asks for twice its own quiet
    median, and raises a fifth of the alerts a fixed threshold would (15 against 80)."""
    raised = fixed = 0
    for seed in range(30):
        rng = np.random.default_rng(seed)
        t = np.arange(500)
        cycles = np.sin(2 * np.pi * t / 12) + np.sin(2 * np.pi * t / 84)
        x = 100 * (1 + 0.005 * (cycles + rng.normal(0, 1, 500)))
        raised += len(detect_rank_scan(x))
        fixed += len(detect_rank_scan(x, calibrate=0.0))
    assert raised * 4 <= fixed


def test_the_move_back_of_a_revert_is_found_after_the_step() -> None:
    """A 2-deviation step undone 15 builds later: starting afresh after the alarm left too few
    builds of the new level before the move back (found in 3 of 40); starting at the change's
    date finds it in 32. Both moves are raised online, never at a build already passed."""
    back = {"change": 0, "alarm": 0}
    for seed in range(40):
        x = 100 * (1 + np.random.default_rng(seed).normal(0, 0.03, 250))
        x[120:135] *= 1.06
        for restart in back:
            alerts = detect_rank_scan(x, restart=restart)
            back[restart] += any(abs(a.index - 135) <= 5 and a.direction == "down" for a in alerts)
            raised = [a.raised_at for a in alerts]
            assert raised == sorted(set(raised))
    assert back["change"] >= 28
    assert back["alarm"] <= 12

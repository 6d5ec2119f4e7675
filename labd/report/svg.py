"""Small SVG plots, written directly: a report opens anywhere, with nothing to fetch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

W, H, PAD = 560, 180, 36


def _scale(lo: float, hi: float, size: float, flip: bool = False) -> tuple[float, float]:
    if hi == lo:  # all values equal: centre them
        lo, hi = lo - 1, hi + 1
    k = (size - 2 * PAD) / (hi - lo)
    return (k, lo) if not flip else (-k, hi)


def _frame(title: str, body: str, lo: float, hi: float) -> str:
    return (
        f'<svg class="plot" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<rect x="{PAD}" y="{PAD / 2}" width="{W - 2 * PAD}" height="{H - 1.5 * PAD}" '
        f'class="area"/>{body}'
        f'<text x="2" y="{PAD / 2 + 10}" class="tick">{hi:.4g}</text>'
        f'<text x="2" y="{H - PAD}" class="tick">{lo:.4g}</text></svg>'
    )


def _y(v: float, lo: float, hi: float) -> float:
    span = (hi - lo) or 2.0
    base = lo if hi != lo else lo - 1
    return H - PAD - (v - base) / span * (H - 1.5 * PAD)


def _x(i: int, n: int) -> float:
    return PAD + (i / max(n - 1, 1)) * (W - 2 * PAD)


def series_plot(
    title: str, values: Sequence[float], marked: Sequence[int] = (), warmup: int = 0
) -> str:
    """Values in iteration order (the plot that shows throttling and warm-up)."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    points = " ".join(f"{_x(i, len(values)):.1f},{_y(v, lo, hi):.1f}" for i, v in enumerate(values))
    dots = "".join(
        f'<circle cx="{_x(i, len(values)):.1f}" cy="{_y(v, lo, hi):.1f}" r="2.5" '
        f'class="{"marked" if i in marked else "warm" if i < warmup else "dot"}"/>'
        for i, v in enumerate(values)
    )
    return _frame(title, f'<polyline points="{points}" class="line"/>{dots}', lo, hi)


def histogram(title: str, values: Sequence[float], bins: int = 20) -> str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / width), bins - 1) if hi > lo else bins // 2] += 1
    top = max(counts)
    bar_w = (W - 2 * PAD) / bins
    bars = "".join(
        f'<rect x="{PAD + i * bar_w:.1f}" y="{_y(c, 0, top):.1f}" width="{bar_w - 1:.1f}" '
        f'height="{H - PAD - _y(c, 0, top):.1f}" class="bar"/>'
        for i, c in enumerate(counts)
    )
    axis = f'<text x="{PAD}" y="{H - 8}" class="tick">{lo:.4g}</text>'
    axis += f'<text x="{W - PAD - 40}" y="{H - 8}" class="tick">{hi:.4g}</text>'
    return _frame(title, bars + axis, 0, top)


def intervals(title: str, rows: Sequence[tuple[str, float, float, float]], effect: float) -> str:
    """Ratio intervals per metric, around 1 with the equivalence band shaded."""
    finite = [v for _, lo, est, hi in rows for v in (lo, est, hi) if math.isfinite(v)]
    if not finite:
        return ""
    lo = min([*finite, 1 - 2 * effect])
    hi = max([*finite, 1 + 2 * effect])
    height = PAD + 28 * len(rows)

    def x(v: float) -> float:
        return PAD + 110 + (v - lo) / (hi - lo) * (W - 2 * PAD - 110)

    body = (
        f'<rect x="{x(1 - effect):.1f}" y="4" width="{x(1 + effect) - x(1 - effect):.1f}" '
        f'height="{height - 8}" class="band"/>'
        f'<line x1="{x(1):.1f}" x2="{x(1):.1f}" y1="4" y2="{height - 4}" class="ref"/>'
    )
    for n, (label, low, est, high) in enumerate(rows):
        y = 22 + 28 * n
        body += f'<text x="4" y="{y + 4}" class="tick">{escape(label)}</text>'
        if all(math.isfinite(v) for v in (low, est, high)):
            body += (
                f'<line x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{y}" y2="{y}" class="ci"/>'
                f'<circle cx="{x(est):.1f}" cy="{y}" r="4" class="dot"/>'
            )
    return (
        f'<svg class="plot" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
    )


def history_plot(
    title: str,
    values: Sequence[float],
    band: tuple[Sequence[float], Sequence[float]],
    alerts: Sequence[int],
) -> str:
    """A test's history with the prediction band and the builds where changes were found."""
    if not values:
        return ""
    low, high = band
    everything = [
        *values,
        *(v for v in low if math.isfinite(v)),
        *(v for v in high if math.isfinite(v)),
    ]
    lo, hi = min(everything), max(everything)
    n = len(values)
    upper = [(i, v) for i, v in enumerate(high) if math.isfinite(v)]
    lower = [(i, v) for i, v in enumerate(low) if math.isfinite(v)]
    polygon = " ".join(f"{_x(i, n):.1f},{_y(v, lo, hi):.1f}" for i, v in upper + lower[::-1])
    line = " ".join(f"{_x(i, n):.1f},{_y(v, lo, hi):.1f}" for i, v in enumerate(values))
    marks = "".join(
        f'<line x1="{_x(i, n):.1f}" x2="{_x(i, n):.1f}" y1="{PAD / 2}" y2="{H - PAD}" '
        'class="alert"/>'
        for i in alerts
    )
    body = (f'<polygon points="{polygon}" class="band"/>' if polygon else "") + marks
    body += f'<polyline points="{line}" class="line"/>'
    return _frame(title, body, lo, hi)

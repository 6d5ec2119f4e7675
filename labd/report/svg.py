"""Charts as SVG, written directly: a report or a console page opens anywhere, fetches nothing.

Every chart has axes with round ticks, the metric's unit, and iteration or build labels; base
and new share one scale; a few values are shown as dots (a strip plot), many as a box plot,
never as a histogram of one value per bin; a band stops at the metric's domain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import numpy as np

from labd.report.axes import (
    BOTTOM,
    LEFT,
    RIGHT,
    TOP,
    H,
    Scale,
    W,
    domain_low,
    frame,
    index_marks,
    label,
    short,
    titled,
    value_ticks,
    x_axis,
    y_axis,
)

STRIP_MAX = 60  # values per group drawn one by one; more become a box plot
ROW = 44  # height of one group (distribution) or one metric (intervals)


def _vertical(values: Sequence[float], floor: float) -> tuple[Scale, list[float]]:
    marks = value_ticks(values, floor)
    return Scale(marks[0], marks[-1], H - BOTTOM, TOP), marks


def _index_scale(n: int) -> Scale:
    if n == 1:
        return Scale(-0.5, 0.5, LEFT, W - RIGHT)
    return Scale(0, n - 1, LEFT + 8, W - RIGHT - 8)


def _labelled(marks: list[tuple[float, str]], indexes: Sequence[int]) -> list[tuple[float, str]]:
    """Ticks at value positions, labelled with those values' iteration indexes when given."""
    if not indexes:
        return marks
    return [(position, str(indexes[int(position)])) for position, _ in marks]


def series_plot(
    title: str,
    values: Sequence[float],
    unit: str = "",
    marked: Sequence[int] = (),
    warmup: int = 0,
    shared: Sequence[float] = (),
    quantity: str = "value",
    indexes: Sequence[int] = (),
) -> str:
    """Values in iteration order (the plot that shows throttling and warm-up): grey dots are
    warm-ups, red ones outliers. `shared`: other values the value axis must also cover, so
    two runs' plots read on one scale. `indexes`: each value's iteration index, as the API,
    the CSV and the artefact folders number it (without: counted from 1)."""
    if not values:
        return ""
    n = len(values)
    floor = domain_low([*values, *shared])
    y, marks = _vertical([*values, *shared], floor)
    x = _index_scale(n)
    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    dots = "".join(
        f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" '
        f'class="{"marked" if i in marked else "warm" if i < warmup else "dot"}"/>'
        for i, v in enumerate(values)
    )
    body = (
        y_axis(y, marks, titled(unit, quantity))
        + x_axis(x, _labelled(index_marks(n), indexes), "iteration")
        + f'<polyline points="{points}" class="line"/>{dots}'
    )
    return frame(title, body)


def distribution(
    title: str,
    groups: Sequence[tuple[str, Sequence[float]]],
    unit: str = "",
    quantity: str = "value",
) -> str:
    """Each group (e.g. base and new) on one row, all on one value scale: every value as a dot
    with the median as a bar when there are few, else a box plot (quartiles, whiskers to the
    furthest value within 1.5 IQR, dots beyond)."""
    kept = [(name, list(vals)) for name, vals in groups if vals]
    if not kept:
        return ""
    everything = [v for _, vals in kept for v in vals]
    marks = value_ticks(everything, domain_low(everything))
    height = TOP + ROW * len(kept) + BOTTOM
    x = Scale(marks[0], marks[-1], LEFT, W - RIGHT)
    step = marks[1] - marks[0] if len(marks) > 1 else 1.0
    body = "".join(
        f'<line x1="{x(m):.1f}" x2="{x(m):.1f}" y1="{TOP}" y2="{height - BOTTOM}" class="grid"/>'
        for m in marks
    )
    body += x_axis(x, [(m, label(m, step)) for m in marks], titled(unit, quantity), height=height)
    for row, (name, vals) in enumerate(kept):
        middle = TOP + ROW * row + ROW / 2
        body += (
            f'<text x="{LEFT - 6}" y="{middle - 2:.1f}" class="tick" text-anchor="end">'
            f'{escape(short(name, 11))}</text><text x="{LEFT - 6}" y="{middle + 11:.1f}" '
            f'class="tick" text-anchor="end">n={len(vals)}</text>'
        )
        body += _strip(vals, x, middle) if len(vals) <= STRIP_MAX else _box(vals, x, middle)
    return frame(title, body, height=height)


def _strip(vals: list[float], x: Scale, middle: float) -> str:
    # A fixed, even spread (golden-ratio steps) rather than random jitter: the same values
    # always draw the same picture.
    dots = "".join(
        f'<circle cx="{x(v):.1f}" cy="{middle + 26 * (((i * 0.618034) % 1) - 0.5):.1f}" r="3" '
        'class="dot strip"/>'
        for i, v in enumerate(vals)
    )
    median = x(float(np.median(vals)))
    return dots + (
        f'<line x1="{median:.1f}" x2="{median:.1f}" y1="{middle - 16:.1f}" '
        f'y2="{middle + 16:.1f}" class="median"/>'
    )


def _box(vals: list[float], x: Scale, middle: float) -> str:
    q1, median, q3 = (float(q) for q in np.percentile(vals, [25, 50, 75]))
    fence = 1.5 * (q3 - q1)
    inside = [v for v in vals if q1 - fence <= v <= q3 + fence]
    low, high = min(inside), max(inside)
    beyond = "".join(
        f'<circle cx="{x(v):.1f}" cy="{middle:.1f}" r="2.5" class="marked"/>'
        for v in vals
        if v < low or v > high
    )
    top, bottom = middle - 12, middle + 12
    return (
        f'<line x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{middle}" y2="{middle}" class="ci"/>'
        f'<rect x="{x(q1):.1f}" y="{top}" width="{max(x(q3) - x(q1), 1):.1f}" height="24" '
        f'class="box"/><line x1="{x(median):.1f}" x2="{x(median):.1f}" y1="{top}" '
        f'y2="{bottom}" class="median"/>{beyond}'
    )


def intervals(title: str, rows: Sequence[tuple[str, float, float, float]], effect: float) -> str:
    """Per metric, the change of new against base in percent with its 95% interval, around
    no change, with the equivalence band (±effect) shaded. Rows are (label, ratio low, ratio,
    ratio high); an unbounded end runs to the edge."""
    pct = [(name, 100 * (lo - 1), 100 * (est - 1), 100 * (hi - 1)) for name, lo, est, hi in rows]
    finite = [v for _, lo, est, hi in pct for v in (lo, est, hi) if math.isfinite(v)]
    if not finite:
        return ""
    marks = value_ticks([*finite, -200 * effect, 200 * effect])
    x = Scale(marks[0], marks[-1], LEFT + 40, W - RIGHT)
    height = TOP + ROW * len(rows) + BOTTOM
    step = marks[1] - marks[0] if len(marks) > 1 else 1.0
    body = (
        f'<rect x="{x(-100 * effect):.1f}" y="{TOP}" '
        f'width="{x(100 * effect) - x(-100 * effect):.1f}" height="{ROW * len(rows)}" '
        f'class="band"/><line x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{TOP}" '
        f'y2="{height - BOTTOM}" class="ref"/>'
    )
    body += x_axis(
        x,
        [(m, f"{label(m, step)}%") for m in marks],
        "change of new against base (%), 95% interval",
        height=height,
    )
    for n, (name, low, est, high) in enumerate(pct):
        y = TOP + ROW * n + ROW / 2
        body += f'<text x="4" y="{y + 4}" class="tick">{escape(short(name, 16))}</text>'
        if math.isfinite(est):
            left = x(max(low, marks[0])) if math.isfinite(low) else x.start
            right = x(min(high, marks[-1])) if math.isfinite(high) else x.end
            body += (
                f'<line x1="{left:.1f}" x2="{right:.1f}" y1="{y}" y2="{y}" class="ci"/>'
                f'<circle cx="{x(est):.1f}" cy="{y}" r="4" class="dot"/>'
            )
    return frame(title, body, height=height)


def history_plot(
    title: str,
    values: Sequence[float],
    band: tuple[Sequence[float], Sequence[float]],
    alerts: Sequence[int],
    builds: Sequence[str] = (),
    unit: str = "",
    quantity: str = "value",
) -> str:
    """A test's history, one value per build (labelled on the x axis), with the prediction
    band cut at the metric's domain and a red line at each build where a change was found."""
    if not values:
        return ""
    floor = domain_low(values)
    low = [max(v, floor) if math.isfinite(v) else v for v in band[0]]
    high = [max(v, floor) if math.isfinite(v) else v for v in band[1]]
    n = len(values)
    covered = [*values, *(v for v in (*low, *high) if math.isfinite(v))]
    y, marks = _vertical(covered, floor)
    x = _index_scale(n)
    upper = [(i, v) for i, v in enumerate(high) if math.isfinite(v)]
    lower = [(i, v) for i, v in enumerate(low) if math.isfinite(v)]
    polygon = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in upper + lower[::-1])
    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    names = list(builds) or [str(i + 1) for i in range(n)]
    ticks = [(where, short(names[int(where)])) for where, _ in index_marks(n, most=7)]
    body = y_axis(y, marks, titled(unit, quantity)) + x_axis(x, ticks, "build")
    body += f'<polygon points="{polygon}" class="band"/>' if polygon else ""
    body += "".join(
        f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{TOP}" y2="{H - BOTTOM}" class="alert"/>'
        for i in alerts
    )
    body += f'<polyline points="{line}" class="line"/>' + "".join(
        f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="2.5" class="dot">'
        f"<title>{escape(names[i])}: {v:.4g}</title></circle>"
        for i, v in enumerate(values)
    )
    return frame(title, body)


def progress_curve(title: str, times_ms: Sequence[float], progress: Sequence[float]) -> str:
    """Visual progress (0-100%) against time since navigation, as a step line."""
    if not times_ms:
        return ""
    marks = value_ticks([0.0, *times_ms], 0.0)
    x = Scale(marks[0], marks[-1], LEFT, W - RIGHT)
    y = Scale(0.0, 100.0, H - BOTTOM, TOP)
    step = marks[1] - marks[0] if len(marks) > 1 else 1.0
    points, last = [], 0.0
    for t, p in zip(times_ms, progress, strict=True):
        points += [f"{x(t):.1f},{y(100 * last):.1f}", f"{x(t):.1f},{y(100 * p):.1f}"]
        last = p
    body = (
        y_axis(y, [0, 25, 50, 75, 100], "visual progress (%)")
        + x_axis(x, [(m, label(m, step)) for m in marks], "time since navigation (ms)")
        + f'<polyline points="{" ".join(points)}" class="line"/>'
    )
    return frame(title, body)


STYLE = """
.plot { background: #fff; margin: .3em 0 }
.plot .heading { font-size: 12px; font-weight: 600; fill: #222 }
.plot .grid { stroke: #eee } .plot .axis { stroke: #888 }
.plot .tick { font-size: 11px; fill: #555 } .plot .axis-title { font-size: 11px; fill: #333 }
.plot .line { fill: none; stroke: #2463b5; stroke-width: 1.5 }
.plot .dot { fill: #2463b5 } .plot .warm { fill: #aaa } .plot .marked { fill: #d33 }
.plot .strip { fill-opacity: .6 } .plot .median { stroke: #111; stroke-width: 2 }
.plot .box { fill: #2463b533; stroke: #2463b5 }
.plot .band { fill: #2463b522; stroke: none } .plot .ref { stroke: #555; stroke-dasharray: 3 3 }
.plot .ci { stroke: #222; stroke-width: 2 } .plot .alert { stroke: #d33; stroke-width: 1.5 }
"""
"""The charts' own rules, shared by the report's inline style and the console's CSS file."""

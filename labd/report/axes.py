"""Axes for the SVG charts: round tick values, their labels with the unit, and the frame.

A chart's value axis always starts and ends on a tick, so a reader can tell a 2% change from a
200% one; it never runs below the metric's domain (a time or a count cannot be negative).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

W, H = 600, 220
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 26, 46


@dataclass(frozen=True)
class Scale:
    """Maps values lo..hi onto pixels start..end (end < start for a vertical axis)."""

    lo: float
    hi: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.hi - self.lo or 1.0
        return self.start + (value - self.lo) / span * (self.end - self.start)


def domain_low(values: Sequence[float]) -> float:
    """The lowest value a metric can take, as its values tell it: 0 when none is negative
    (times, counts, sizes, rates), else unbounded."""
    finite = [v for v in values if math.isfinite(v)]
    return 0.0 if finite and min(finite) >= 0 else -math.inf


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round values (1, 2 or 5 times a power of ten) covering lo..hi, the
    first at or below lo and the last at or above hi."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0, 1.0]
    if hi <= lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(count, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.floor(lo / step + 1e-9) * step
    out = [first]
    while out[-1] < hi - 1e-9 * step:
        out.append(first + len(out) * step)
    return [0.0 if abs(t) < step * 1e-9 else t for t in out]


def value_ticks(values: Sequence[float], floor: float = -math.inf) -> list[float]:
    """Ticks for an axis showing `values`, never below `floor` (the metric's domain)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return [0.0, 1.0]
    found = ticks(min(finite), max(finite))
    if found[0] < floor:
        found = [floor, *(t for t in found if t > floor)]
    return found


def label(value: float, step: float) -> str:
    """A tick label with as many decimals as the step needs, thousands grouped."""
    decimals = max(0, -math.floor(math.log10(abs(step)) + 1e-9)) if step else 0
    if abs(value) >= 1e7 or (value and abs(value) < 1e-4):
        return f"{value:.3g}"
    return f"{value:,.{decimals}f}"


def titled(unit: str, name: str) -> str:
    """An axis title: the quantity and its unit."""
    return f"{name} ({unit})" if unit else name


def frame(title: str, body: str, width: int = W, height: int = H) -> str:
    """The SVG element around a chart's body, titled for screen readers and tooltips."""
    return (
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>'
        f'<text x="{LEFT}" y="16" class="heading">{escape(title)}</text>{body}</svg>'
    )


def y_axis(scale: Scale, marks: Sequence[float], title: str, width: int = W) -> str:
    """Grid lines and labelled ticks of a vertical value axis, and its title."""
    step = marks[1] - marks[0] if len(marks) > 1 else 1.0
    out = []
    for mark in marks:
        y = scale(mark)
        out.append(
            f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">'
            f"{label(mark, step)}</text>"
        )
    middle = (scale.start + scale.end) / 2
    out.append(
        f'<text x="14" y="{middle:.1f}" class="axis-title" text-anchor="middle" '
        f'transform="rotate(-90 14 {middle:.1f})">{escape(title)}</text>'
    )
    return "".join(out)


def x_axis(scale: Scale, marks: Sequence[tuple[float, str]], title: str, height: int = H) -> str:
    """Labelled ticks of a horizontal axis (a value, or a category's position), and its
    title."""
    base = height - BOTTOM
    out = [f'<line x1="{scale.start}" x2="{scale.end}" y1="{base}" y2="{base}" class="axis"/>']
    for where, text in marks:
        x = scale(where)
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}" class="axis"/>'
            f'<text x="{x:.1f}" y="{base + 16}" class="tick" text-anchor="middle">'
            f"{escape(text)}</text>"
        )
    out.append(
        f'<text x="{(scale.start + scale.end) / 2:.1f}" y="{height - 6}" class="axis-title" '
        f'text-anchor="middle">{escape(title)}</text>'
    )
    return "".join(out)


def index_marks(count: int, first: int = 1, most: int = 10) -> list[tuple[float, str]]:
    """Integer tick positions 0..count-1 labelled first.., about `most` of them, the last
    always among them."""
    if count <= 0:
        return []
    step = max(1, math.ceil(count / most))
    marks = list(range(0, count, step))
    if marks[-1] != count - 1:  # the newest is always labelled, its crowded neighbour not
        marks = (
            [*marks[:-1], count - 1] if count - 1 - marks[-1] < step / 2 else [*marks, count - 1]
        )
    return [(float(i), str(i + first)) for i in marks]


def short(text: str, size: int = 10) -> str:
    """A category label that fits under its tick."""
    return text if len(text) <= size else text[: size - 1] + "…"

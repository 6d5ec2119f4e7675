"""HTML tables shared by `labd report` and the web console: the comparison of base and new
(Perfherder's compare, one row per metric, the most severe first) and a run's environment."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from labd.visible import shown

SEVERITY = {"regression": 0, "improvement": 1, "inconclusive": 2, "no change": 3}


def by_severity(rows: Iterable[Any]) -> list[Any]:
    """Comparisons, regressions first, then improvements, inconclusive, no change; within
    each, the largest change first."""

    def key(row: Any) -> tuple[int, float]:
        change = abs(row.ratio - 1) if math.isfinite(row.ratio) else 0.0
        return SEVERITY.get(row.verdict, 4), -change

    return sorted(rows, key=key)


def _pct(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.2f}%" if math.isfinite(ratio) else "-"


def _value(x: float | None, unit: str) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.4g}" + (f" {escape(unit)}" if unit else "")


def comparison_rows(rows: Sequence[Any], units: Mapping[str, str], label: str = "") -> str:
    """<tr> elements of the compare table for `rows` (labd.stats.compare.Comparison), one per
    metric; `label` names the test in a table of many."""
    out = []
    for r in rows:
        unit = units.get(r.metric, "")
        base = getattr(r.base, r.location) if r.base else None
        new = getattr(r.new, r.location) if r.new else None
        interval = (
            f"[{_pct(r.ratio_ci_low)}, {_pct(r.ratio_ci_high)}]"
            if math.isfinite(r.ratio_ci_low) or math.isfinite(r.ratio_ci_high)
            else "-"
        )
        out.append(
            f"<tr class='{r.verdict.replace(' ', '-')}'>"
            + (f"<td>{escape(label)}</td>" if label else "")
            + f"<td>{escape(r.metric)}</td><td>{r.location}</td><td>{_value(base, unit)}</td>"
            f"<td>{_value(new, unit)}</td><td>{_pct(r.ratio)}</td><td>{interval}</td>"
            f"<td>{r.n_base}</td><td>{r.n_new}</td>"
            f"<td class='verdict'>{escape(r.verdict)}</td><td>{escape(r.method)}</td>"
            f"<td class='note'>{escape(r.reason)}</td></tr>"
        )
    return "".join(out)


def comparison_head(with_test: bool = False) -> str:
    return (
        "<tr>"
        + ("<th>test</th>" if with_test else "")
        + "<th>metric</th><th>of</th><th>base</th><th>new</th><th>delta</th>"
        "<th>95% interval</th><th>n base</th><th>n new</th><th>verdict</th><th>method</th>"
        "<th>why</th></tr>"
    )


def environment(fingerprint: Mapping[str, Any]) -> str:
    """A run's conditions (device, build, host tuning, ...) as a two-column table."""
    rows = []
    for key, value in sorted(fingerprint.items()):
        if key in ("artifacts", "metrics"):
            continue
        # Readable in any script (JSON's ASCII escapes made "ünï" \u00fcn\u00ef), and what
        # would change what is read (a bidi override) written as its escape.
        text = (
            value
            if isinstance(value, str)
            else json.dumps(value, sort_keys=True, ensure_ascii=False)
        )
        rows.append(
            f"<tr><th>{escape(shown(key))}</th><td class='env'>{escape(shown(text))}</td></tr>"
        )
    if not rows:
        return "<p class='note'>No conditions were recorded for this run.</p>"
    return "<table class='environment'>" + "".join(rows) + "</table>"


def evidence(job_id: str, files: Sequence[Mapping[str, Any]], console: str = "") -> str:
    """A job's kept files (videos, heat maps, progress, logs), linked to the web console at
    `console` (which asks the reader to sign in); their names alone without one."""
    head = f"<h2>Evidence: job {escape(job_id)}</h2>"
    if not files:
        return head + "<p class='note'>This job keeps no file on the daemon's host.</p>"
    job_url = f"{console}/jobs/{quote(job_id, safe='')}"
    rows = []
    for f in files:
        name = escape(str(f["name"]))
        link = f"<a href='{escape(job_url)}/artefacts/{escape(quote(str(f['name'])))}'>{name}</a>"
        rows.append(
            f"<tr><td>{link if console else name}</td><td>{escape(str(f['kind']))}</td>"
            f"<td>{int(f['size']):,} bytes</td></tr>"
        )
    where = (
        f"<p class='note'>The job's page in the web console plays the videos and shows the "
        f"filmstrips: <a href='{escape(job_url)}'>{escape(job_url)}</a>.</p>"
        if console
        else ""
    )
    return (
        head
        + where
        + "<table><tr><th>file</th><th>kind</th><th>size</th></tr>"
        + "".join(rows)
        + "</table>"
    )

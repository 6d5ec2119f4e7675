"""`labd report`: one self-contained HTML file per job (or A/B pair): the summary table,
diagnostics in plain language, plots in iteration order and as distributions, the comparison
with its intervals, and the test's history with its prediction band and alerts."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from labd.metric_specs import directions_of, specs_of, units_of
from labd.model import Iteration
from labd.report import svg
from labd.report.comparison import comparability, one_variant
from labd.report.tables import (
    by_severity,
    comparison_head,
    comparison_rows,
    environment,
    evidence,
)
from labd.stats import (
    Summary,
    compare,
    detect,
    diagnose,
    prediction_band,
    summarize,
    tukey_outliers,
)
from labd.store import measured, set_aside

STYLE = (
    """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1180px; color: #222 }
h1 { font-size: 1.5em } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em }
table { border-collapse: collapse; margin: .5em 0 } td, th { padding: .25em .7em; text-align: right;
  border-bottom: 1px solid #eee } th:first-child, td:first-child { text-align: left }
.plots { display: flex; flex-wrap: wrap; gap: 1em }
.regression { color: #b00 } .improvement { color: #070 } .inconclusive { color: #a60 }
.note { color: #555 } .finding { margin: .2em 0 }
td.env { text-align: left; font-family: monospace; font-size: 12px }
"""
    + svg.STYLE
)


def _its(results: dict[str, Any]) -> list[Iteration]:
    job = results["job"]
    return [
        Iteration.model_validate(i)
        for i in results["iterations"]
        if i["attempt"] == job["attempts"]
    ]


def _job_section(
    results: dict[str, Any], label: str, shared: dict[str, list[float]] | None = None
) -> str:
    """One run: what was set aside, the summary table, per metric the diagnostics and the
    values in iteration order (on the scale of `shared`, the other run's values, if given),
    and the run's environment."""
    job, spec = results["job"], results["job"]["spec"]
    its = _its(results)
    values = measured(its)
    units = units_of(results)
    out = [
        f"<h2>{escape(label)}: {escape(spec['suite'])}/{escape(spec['test'])}</h2>",
        f"<p>Job <code>{escape(job['id'])}</code> on <code>{escape(job['device_id'] or '-')}"
        f"</code>: <b>{escape(job['state'])}</b>"
        + (f" ({escape(job['error'])})" if job["error"] else "")
        + f"; revision {escape(spec['build'].get('revision') or '-')}.</p>",
    ]
    aside = set_aside(its)
    if aside["count"]:
        reasons = "; ".join(f"{n}x {r}" for r, n in aside["reasons"].items())
        out.append(
            f'<p class="finding">⚠ {aside["count"]} measured iterations were set aside and '
            f"are not in the figures below: {escape(reasons)}.</p>"
        )
    if not values:
        out.append('<p class="note">This job has no measured iteration with values.</p>')
        return "\n".join(out)
    out.append(summary_table(values, units))
    warmup = sum(1 for i in its if i.warmup)
    for metric, vals in values.items():
        plotted = [i for i in its if metric in i.values and not i.error]
        in_order = [i.values[metric] for i in plotted]
        findings = diagnose(vals)
        out.append(f"<h3>{escape(metric)}</h3>")
        if findings:
            out += [
                f'<p class="finding">⚠ {escape(f.message)}. <span class="note">'
                f"{escape(f.hint)}.</span></p>"
                for f in findings
            ]
        elif len(vals) < 3:
            count = "One value" if len(vals) == 1 else f"Only {len(vals)} values"
            too_few = f"{count}: too few to diagnose (the diagnostics need 3 or more)."
            out.append(f'<p class="note">{too_few}</p>')
        elif len(set(vals)) == 1:
            out.append('<p class="note">All values are identical: nothing varies to diagnose.</p>')
        else:
            out.append('<p class="note">No diagnostic fired: the values look trustworthy.</p>')
        marked = [warmup + i for i in tukey_outliers(vals)]
        other = (shared or {}).get(metric, [])
        plots = svg.series_plot(
            f"{metric} in iteration order",
            in_order,
            units.get(metric, ""),
            marked,
            warmup,
            other,
            quantity=metric,
            indexes=[i.index for i in plotted],
        )
        if shared is None:  # alone: its distribution here (a pair's is in the comparison)
            plots += svg.distribution(
                f"{metric} distribution", [("values", vals)], units.get(metric, ""), metric
            )
        out.append(f'<div class="plots">{plots}</div>')
    first = next((i for i in its if not i.warmup and not i.error), None)
    if first is not None:
        out.append("<h3>Environment</h3>" + environment(first.fingerprint))
    return "\n".join(out)


def _defined(x: float, spec: str, unit: str = "") -> str:
    """`x` formatted, or `-` where the statistic is undefined (one value's spread, say)."""
    return format(x, spec) + unit if math.isfinite(x) else "-"


def summary_table(values: dict[str, list[float]], units: dict[str, str]) -> str:
    """Per metric: n, mean ± sd, median with its interval, CoV, min, max, p95."""
    found = {metric: summarize(vals) for metric, vals in values.items()}
    return summaries_table({m: s for m, s in found.items() if s is not None}, units)


def summaries_table(summaries: dict[str, Summary], units: dict[str, str]) -> str:
    """`summary_table` of summaries already made."""
    rows = []
    for metric, s in summaries.items():
        unit = units.get(metric, "")
        rows.append(
            f"<tr><td>{escape(metric)}</td><td>{escape(unit)}</td><td>{s.n}</td>"
            f"<td>{s.mean:.4g} ± {_defined(s.stddev, '.2g')}</td>"
            f"<td>{s.median:.4g} [{_defined(s.median_ci[0], '.4g')}, "
            f"{_defined(s.median_ci[1], '.4g')}]</td>"
            f"<td>{_defined(100 * s.cov, '.2f', '%')}</td><td>{s.min:.4g}</td><td>{s.max:.4g}</td>"
            f"<td>{s.p95:.4g}</td></tr>"
        )
    return (
        "<table><tr><th>metric</th><th>unit</th><th>n</th><th>mean ± sd</th>"
        "<th>median [95% CI]</th><th>CoV</th><th>min</th><th>max</th><th>p95</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _comparison(base: dict[str, Any], new: dict[str, Any], effect: float) -> str:
    b, n = measured(_its(base)), measured(_its(new))
    directions = directions_of(specs_of(new))
    shared = sorted(b.keys() & n.keys())
    if not shared:
        return "<h2>Comparison</h2><p class='note'>The two jobs share no metric.</p>"
    results = by_severity(
        compare({m: (b[m], n[m], directions.get(m, False)) for m in shared}, effect=effect)
    )
    units = units_of(base) | units_of(new)
    differ = comparability(base, new)["conditions_differ"]
    warning = (
        "<p class='finding'>⚠ The two runs' conditions differ: "
        + escape("; ".join(differ))
        + ".</p>"
        if differ
        else ""
    )
    plot = svg.intervals(
        "change of new against base, with 95% intervals",
        [(r.metric, r.ratio_ci_low, r.ratio, r.ratio_ci_high) for r in results],
        effect,
    )
    distributions = "".join(
        svg.distribution(f"{m}: base and new", [("base", b[m]), ("new", n[m])], units.get(m, ""), m)
        for m in shared
    )
    return (
        f"<h2>Comparison (effect of interest ±{100 * effect:g}%)</h2>"
        f"{warning}<table>{comparison_head()}{comparison_rows(results, units)}</table>"
        f"{plot}<div class='plots'>{distributions}</div>"
    )


def _history(history: dict[str, Any], units: dict[str, str]) -> str:
    out = ["<h2>History</h2>"]
    if not history.get("series"):
        return out[0] + "<p class='note'>No succeeded run of this test is stored yet.</p>"
    for name, series in history["series"].items():
        out.append(history_section(name, series, units))
    return "\n".join(out)


def _size(alert: Any) -> str:
    """A change's size: relative, or absolute where no relative one is defined (from 0)."""
    if alert.relative:
        return f"{100 * alert.magnitude:+.1f}%"
    return f"{alert.absolute_change:+.4g} (absolute: the level before was {alert.level_before:.4g})"


def history_section(name: str, series: dict[str, Any], units: dict[str, str]) -> str:
    """One series of a test's history (`suite/test/metric/device class`): its changes in
    words and the chart with builds, prediction band and alerts."""
    values = series["values"]
    if len(values) < 2:
        return f"<p class='note'>{escape(name)}: one build so far; a history needs more.</p>"
    try:
        alerts = detect(values)
    except ValueError as e:  # a value the detectors cannot take (beyond 1e100, say)
        reason = escape(str(e))
        return f"<p class='note'>{escape(name)}: {len(values)} builds; not analysed: {reason}.</p>"
    band = prediction_band(values)
    higher_is_better = series.get("higher_is_better") is True
    found = ", ".join(
        f"{'an improvement' if (a.direction == 'up') == higher_is_better else 'a regression'},"
        f" {a.direction} {_size(a)} at {escape(series['builds'][a.index])}"
        for a in alerts
    )
    metric = name.split("/")[2] if name.count("/") >= 3 else name
    return (
        f"<h3>{escape(name)}</h3><p class='note'>{len(values)} builds; "
        f"{'changes: ' + found if alerts else 'no change found'}.</p>"
        + svg.history_plot(
            name,
            values,
            band,
            [a.index for a in alerts],
            series["builds"],
            units.get(metric, ""),
            metric,
        )
    )


def render(
    results: dict[str, Any],
    other: dict[str, Any] | None = None,
    history: dict[str, Any] | None = None,
    effect: float = 0.01,
    artefacts: dict[str, list[dict[str, Any]]] | None = None,
    console: str = "",
) -> str:
    """The report as one HTML document (inline CSS and SVG; no script, nothing fetched).
    `artefacts`: per job id, the files it keeps (as the API lists them), linked to the web
    console at `console` when given."""
    title = f"labd report: {results['job']['id']}" + (f" vs {other['job']['id']}" if other else "")
    if other is None and results["job"]["spec"].get("ab"):  # an A/B job: its two sides
        name = results["job"]["id"]
        results, other = one_variant(results, "base", name), one_variant(results, "new", name)
    if other is None:
        parts = [_job_section(results, "Job")]
    else:
        parts = [
            _job_section(results, "Baseline", measured(_its(other))),
            _job_section(other, "New", measured(_its(results))),
            _comparison(results, other, effect),
        ]
    for job_id, files in (artefacts or {}).items():
        parts.append(evidence(job_id, files, console))
    if history is not None:
        parts.append(_history(history, units_of(results)))
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}"
        f"</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>"
        + "\n".join(parts)
        + "</body></html>\n"
    )

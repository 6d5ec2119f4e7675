"""`labd report`: one self-contained HTML file per job (or A/B pair): the summary table,
diagnostics in plain language, plots in iteration order and as distributions, the comparison
with its intervals, and the test's history with its prediction band and alerts."""

from __future__ import annotations

from html import escape
from typing import Any

from labd.model import Iteration
from labd.report import svg
from labd.report.comparison import comparability, one_variant
from labd.stats import compare, detect, diagnose, prediction_band, summarize, tukey_outliers
from labd.store import measured, set_aside

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1180px; color: #222 }
h1 { font-size: 1.5em } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em }
table { border-collapse: collapse; margin: .5em 0 } td, th { padding: .25em .7em; text-align: right;
  border-bottom: 1px solid #eee } th:first-child, td:first-child { text-align: left }
.plots { display: flex; flex-wrap: wrap; gap: 1em }
.plot .area { fill: #fafafa; stroke: #ddd }
.plot .line { fill: none; stroke: #2463b5; stroke-width: 1.5 }
.plot .dot { fill: #2463b5 } .plot .warm { fill: #aaa } .plot .marked { fill: #d33 }
.plot .bar { fill: #7aa7dd } .plot .tick { font-size: 11px; fill: #555 }
.plot .band { fill: #2463b522; stroke: none } .plot .ref { stroke: #555; stroke-dasharray: 3 3 }
.plot .ci { stroke: #222; stroke-width: 2 } .plot .alert { stroke: #d33; stroke-width: 1.5 }
.regression { color: #b00 } .improvement { color: #070 } .inconclusive { color: #a60 }
.note { color: #555 } .finding { margin: .2em 0 }
"""


def _its(results: dict[str, Any]) -> list[Iteration]:
    job = results["job"]
    return [
        Iteration.model_validate(i)
        for i in results["iterations"]
        if i["attempt"] == job["attempts"]
    ]


def _job_section(results: dict[str, Any], label: str) -> str:
    job, spec = results["job"], results["job"]["spec"]
    its = _its(results)
    values = measured(its)
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
    rows = []
    for metric, vals in values.items():
        s = summarize(vals)
        assert s is not None
        rows.append(
            f"<tr><td>{escape(metric)}</td><td>{s.n}</td><td>{s.mean:.4g} ± {s.stddev:.2g}</td>"
            f"<td>{s.median:.4g} [{s.median_ci[0]:.4g}, {s.median_ci[1]:.4g}]</td>"
            f"<td>{100 * s.cov:.2f}%</td><td>{s.min:.4g}</td><td>{s.max:.4g}</td>"
            f"<td>{s.p95:.4g}</td></tr>"
        )
    out.append(
        "<table><tr><th>metric</th><th>n</th><th>mean ± sd</th><th>median [95% CI]</th>"
        "<th>CoV</th><th>min</th><th>max</th><th>p95</th></tr>" + "".join(rows) + "</table>"
    )
    warmup = sum(1 for i in its if i.warmup)
    for metric, vals in values.items():
        in_order = [i.values[metric] for i in its if metric in i.values and not i.error]
        findings = diagnose(vals)
        out.append(f"<h3>{escape(metric)}</h3>")
        if findings:
            out += [
                f'<p class="finding">⚠ {escape(f.message)}. <span class="note">'
                f"{escape(f.hint)}.</span></p>"
                for f in findings
            ]
        elif len(set(vals)) == 1:
            out.append('<p class="note">All values are identical: nothing varies to diagnose.</p>')
        else:
            out.append('<p class="note">No diagnostic fired: the values look trustworthy.</p>')
        marked = [warmup + i for i in tukey_outliers(vals)]
        out.append(
            '<div class="plots">'
            + svg.series_plot(f"{metric} in iteration order", in_order, marked, warmup)
            + svg.histogram(f"{metric} distribution", vals)
            + "</div>"
        )
    return "\n".join(out)


def _comparison(base: dict[str, Any], new: dict[str, Any], effect: float) -> str:
    b, n = measured(_its(base)), measured(_its(new))
    directions = {
        m["name"]: m.get("higher_is_better", False) for m in new["job"]["spec"]["metrics"]
    }
    shared = sorted(b.keys() & n.keys())
    if not shared:
        return "<h2>Comparison</h2><p class='note'>The two jobs share no metric.</p>"
    results = compare({m: (b[m], n[m], directions.get(m, False)) for m in shared}, effect=effect)
    differ = comparability(base, new)["conditions_differ"]
    warning = (
        "<p class='finding'>⚠ The two runs' conditions differ: "
        + escape("; ".join(differ))
        + ".</p>"
        if differ
        else ""
    )
    rows = "".join(
        f"<tr><td>{escape(r.metric)}</td><td class='{r.verdict.replace(' ', '-')}'>"
        f"{escape(r.verdict)}</td><td>{100 * (r.ratio - 1):+.2f}%</td>"
        f"<td>[{100 * (r.ratio_ci_low - 1):+.2f}%, {100 * (r.ratio_ci_high - 1):+.2f}%]</td>"
        f"<td>{escape(r.method)}</td><td>{escape(r.reason)}</td></tr>"
        for r in results
    )
    plot = svg.intervals(
        "ratio new/base with 95% intervals",
        [(r.metric, r.ratio_ci_low, r.ratio, r.ratio_ci_high) for r in results],
        effect,
    )
    return (
        f"<h2>Comparison (effect of interest ±{100 * effect:g}%)</h2>"
        f"{warning}<table><tr><th>metric</th><th>verdict</th><th>change</th><th>95% CI</th>"
        f"<th>method</th><th>why</th></tr>{rows}</table>{plot}"
    )


def _history(history: dict[str, Any]) -> str:
    out = ["<h2>History</h2>"]
    if not history.get("series"):
        return out[0] + "<p class='note'>No succeeded run of this test is stored yet.</p>"
    for name, series in history["series"].items():
        values = series["values"]
        if len(values) < 2:
            out.append(
                f"<p class='note'>{escape(name)}: one build so far; a history needs more.</p>"
            )
            continue
        alerts = detect(values)
        band = prediction_band(values)
        found = ", ".join(
            f"{a.direction} {100 * a.magnitude:+.1f}% at {escape(series['builds'][a.index])}"
            for a in alerts
        )
        out.append(
            f"<h3>{escape(name)}</h3><p class='note'>{len(values)} builds; "
            f"{'changes: ' + found if alerts else 'no change found'}.</p>"
        )
        out.append(svg.history_plot(name, values, band, [a.index for a in alerts]))
    return "\n".join(out)


def render(
    results: dict[str, Any],
    other: dict[str, Any] | None = None,
    history: dict[str, Any] | None = None,
    effect: float = 0.01,
) -> str:
    """The report as one HTML document (inline CSS and SVG; no script, no network)."""
    title = f"labd report: {results['job']['id']}" + (f" vs {other['job']['id']}" if other else "")
    if other is None and results["job"]["spec"].get("ab"):  # an A/B job: its two sides
        name = results["job"]["id"]
        results, other = one_variant(results, "base", name), one_variant(results, "new", name)
    parts = [_job_section(results, "Baseline" if other else "Job")]
    if other is not None:
        parts.append(_job_section(other, "New"))
        parts.append(_comparison(results, other, effect))
    if history is not None:
        parts.append(_history(history))
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}"
        f"</title><style>{STYLE}</style></head><body><h1>{escape(title)}</h1>"
        + "\n".join(parts)
        + "</body></html>\n"
    )

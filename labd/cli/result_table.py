"""How a job's results are shown: the summary table (`labd jobs results`, `labd submit
--wait`) and the CSV of every raw value."""

from __future__ import annotations

import csv
import math
import sys
from typing import Any, TextIO

from labd.cli.text import markup
from labd.errors import UsageError
from labd.metric_specs import units_of


def print_results(results: dict[str, Any]) -> None:
    """A job's result table on stdout, fitted to the terminal; whole when stdout is not one."""
    print_result_table(results, terminal_columns())


def removal_note(removed: dict[str, Any]) -> str:
    """What the database's retention did to a job's raw values (the summary stays)."""
    return (
        f"{removed['iterations']} raw iterations removed on {removed['at']} by the database's "
        "retention ([store] raw_max_age_days); the summary is what they gave"
    )


def require_raw_values(results: dict[str, Any], name: str) -> None:
    """UsageError when retention removed the job's raw values: what needs them cannot run."""
    if removed := results.get("raw_values_removed"):
        raise UsageError(f"{name}: {removal_note(removed)}; only the summary is left")


def terminal_columns() -> int | None:
    """stdout's width when it is a terminal (COLUMNS, when set, as rich reads it); None for a
    pipe or a file, a CI log: there nothing is fitted, lines are as long as the table."""
    from rich.console import Console

    try:
        terminal = sys.stdout.isatty()
    except ValueError:  # closed
        terminal = False
    return Console().width if terminal else None


def print_result_table(results: dict[str, Any], columns: int | None) -> None:
    """A job's summary as a table: per metric, or for an A/B job per metric and variant, with
    the comparison of new against base beside the new row; then what was set aside and why.

    A figure is never cut (`1037…` for 103748 misleads): in `columns` too narrow for the whole
    table the least telling statistics are left out, and said so; a table still too wide is
    printed whole (the terminal wraps its lines). `columns` None: no limit."""
    table, left_out = _fitted_table(results, columns)
    console = console_for(table, columns)
    console.print(table)
    if left_out:
        console.print(f"[dim]left out to fit: {', '.join(left_out)} (all in --json)")
    for note in _notes(results):
        console.print(note)


def console_for(table: Any, columns: int | None) -> Any:
    """A console as wide as `table` with every cell whole, and never narrower than `columns`
    (or 80 for the lines under it): rich's last resort for a table wider than its console is to
    cut every cell, figures and names too."""
    from rich.console import Console

    return Console(width=max(_width_of(table), columns or _LOG_COLUMNS))


def _fitted_table(results: dict[str, Any], columns: int | None) -> tuple[Any, list[str]]:
    """The table, and the statistics left out of it to fit in `columns`."""
    left_out: list[str] = []
    table = _result_table(results, left_out)
    while columns is not None and _width_of(table) > columns and len(left_out) < len(_DROPPABLE):
        left_out.append(_DROPPABLE[len(left_out)])
        table = _result_table(results, left_out)
    return table, left_out


def _notes(results: dict[str, Any]) -> list[str]:
    """The lines under the table, as rich markup: what was set aside, why an A/B verdict is
    inconclusive, the job's error."""
    notes = []
    if removed := results.get("raw_values_removed"):
        notes.append(f"[dim]{markup(removal_note(removed))}[/]")
    if aside := set_aside_note(results.get("set_aside")):
        notes.append(f"[yellow]{markup(aside)}[/]")
    if stopping := stopping_note(results):
        notes.append(f"[yellow]{markup(stopping)}[/]")
    notes += [f"[yellow]{markup(line)}[/]" for line in diagnostic_notes(results)]
    if left_out := left_out_note(results.get("iterations") or []):
        notes.append(f"[yellow]{markup(left_out)}[/]")
    if _is_ab(results):
        for metric, s in results["summary"].items():
            if s.get("reason") and s.get("verdict") == "inconclusive":
                notes.append(f"[yellow]{markup(metric)}[/]: {markup(s['reason'])}")
    if error := results["job"]["error"]:
        notes.append(f"[red]error:[/red] {markup(error, lines=True)}")
    return notes


_LOG_COLUMNS = 80  # the width of the notes under a narrower table when nothing limits it
# Statistics left out of a table too wide for the terminal, first to go first: n, the median
# and the CoV (and an A/B job's change and verdict) say the most, and are kept.
_DROPPABLE = ("mean", "p95", "stddev", "min", "max")


def _is_ab(results: dict[str, Any]) -> bool:
    """An A/B job's results: its spec says so, or its summary (per variant, without `n`)."""
    summary = results["summary"]
    return results["job"]["spec"].get("ab") is not None or any(
        "n" not in s for s in summary.values()
    )


def _result_table(results: dict[str, Any], left_out: list[str]) -> Any:
    """The rich Table of a job's summary without the `left_out` statistics. Every column is
    no_wrap, so `_width_of` is the width at which no cell is cut."""
    from rich.table import Table

    job = results["job"]
    spec = job["spec"]
    ab = _is_ab(results)
    title = f"{spec['suite']}/{spec['test']} on {job['device_id'] or '-'}: {job['state']}"
    table = Table(title=markup(title))
    kept = [i for i, name in enumerate(_SUMMARY_COLUMNS) if name not in left_out]
    table.add_column("metric", no_wrap=True)
    # Each figure's unit, where the scenario or the manifest declares one: 1037 what?
    units = units_of(results)
    unit_cells = [markup(units.get(metric, "")) for metric in results["summary"]]
    if any(unit_cells):
        table.add_column("unit", no_wrap=True)
    else:
        unit_cells = []
    if ab:
        table.add_column("variant", no_wrap=True)
    for i in kept:
        table.add_column(_SUMMARY_COLUMNS[i], justify="right", no_wrap=True)

    def cells(s: dict[str, Any] | None) -> list[str]:
        every = _summary_cells(s)
        return [every[i] for i in kept]

    if ab:
        table.add_column("change [95% CI]", justify="right", no_wrap=True)
        table.add_column("verdict", no_wrap=True)
        for n, (metric, s) in enumerate(results["summary"].items()):
            unit = unit_cells[n : n + 1]
            table.add_row(markup(metric), *unit, "base", *cells(s.get("base")), "", "")
            blank = [""] * len(unit)
            table.add_row("", *blank, "new", *cells(s.get("new")), *_comparison_cells(s))
    else:
        for n, (metric, s) in enumerate(results["summary"].items()):
            table.add_row(markup(metric), *unit_cells[n : n + 1], *cells(s))
    return table


def _width_of(table: Any) -> int:
    """The columns `table` takes with every cell whole."""
    import io

    from rich.console import Console
    from rich.measure import Measurement

    console = Console(width=100_000, file=io.StringIO())
    return Measurement.get(console, console.options, table).maximum


def set_aside_note(aside: dict[str, Any] | None) -> str:
    """What the summary leaves out, as `labd compare` and `labd report` say it: how many
    measured iterations were set aside, per variant of an A/B job, and why; "" for none."""
    if not aside or not aside.get("count"):
        return ""
    count = aside["count"]
    text = f"{count} iteration{'' if count == 1 else 's'} set aside"
    sides = {v: n for v, n in (aside.get("by_variant") or {}).items() if v != "job"}
    if sides:
        text += ": " + ", ".join(f"{variant} {n}" for variant, n in sorted(sides.items()))
    reasons = "; ".join(f"{n}x {reason}" for reason, n in (aside.get("reasons") or {}).items())
    return f"{text} ({reasons})" if reasons else text


# What the table says of a job's values, as `labd report` and `labd compare` do: the findings a
# developer can act on (a warm-up longer than `warmup` was seen only by `labd compare`).
_TOLD = ("warmup", "first_run", "trend", "step", "multimodal", "outliers")
_DIAGNOSED_AT_MOST = 50  # metrics (each costs about 12 ms); `labd report` has every one


def _measured_values(results: dict[str, Any]) -> dict[str, list[float]]:
    """Each metric's measured values of the last attempt, in iteration order, as `labd
    compare` reads a result (labd.stats' samples_from_results); an A/B job's per variant, as
    "metric (base)" and "metric (new)". Empty when there are none."""
    if not results.get("iterations"):
        return {}
    from labd.stats import DataError, samples_from_results

    parts = {"": results}
    if _is_ab(results):
        from labd.report import one_variant  # the store's modules: only for an A/B job

        parts = {side: one_variant(results, side, "") for side in ("base", "new")}
    values: dict[str, list[float]] = {}
    for side, part in parts.items():
        try:
            found = samples_from_results(part, "results").values
        except DataError:  # no measured value (every iteration failed or set aside)
            continue
        values |= {f"{name} ({side})" if side else name: v for name, v in found.items()}
    return values


def diagnostic_notes(results: dict[str, Any]) -> list[str]:
    """One line per finding on each metric's measured values of the last attempt (each
    variant's for an A/B job), in iteration order."""
    series = _measured_values(results)
    if not series:
        return []
    from labd.stats import diagnose

    lines = []
    for name in sorted(series)[:_DIAGNOSED_AT_MOST]:
        lines += [
            f"{name}: {f.message}: {f.hint}" for f in diagnose(series[name]) if f.check in _TOLD
        ]
    if len(series) > _DIAGNOSED_AT_MOST:
        lines.append(f"diagnostics of the first {_DIAGNOSED_AT_MOST} metrics only: labd report")
    return lines


def stopping_note(results: dict[str, Any]) -> str:
    """For a succeeded job with stop_when_stable: whether it stopped because every metric
    was stable or ran to its cap, and which metrics were not stable or not judged; "" for
    another job. (A job at its cap read as one that stopped when stable.)"""
    job, iterations = results["job"], results.get("iterations")
    spec = job["spec"]
    if not spec.get("stop_when_stable") or job["state"] != "succeeded" or not iterations:
        return ""
    from labd.stats import stability, stable_half_width

    series = _measured_values(results)
    found = {name: stability(v, spec["stable_effect"]) for name, v in series.items()}
    measured = max((len(v) for v in series.values()), default=0)
    bar = f"+-{100 * stable_half_width(spec['stable_effect']):.2f}%"
    unstable = [f"{name}: {why}" for name, (ok, why) in found.items() if ok is False]
    unjudged = [name for name, (ok, _) in found.items() if ok is None]
    if unstable:
        said = (
            f"stop_when_stable: not stable after {measured} measured iterations (at most "
            f"{spec['iterations']}), each metric's interval asked within {bar}: "
            + "; ".join(unstable)
        )
    else:
        said = (
            f"stop_when_stable: stopped after {measured} measured iterations (at most "
            f"{spec['iterations']}): every metric's interval within {bar}"
        )
    if unjudged:
        said += f"; not judged (a mean not surely away from 0): {', '.join(unjudged)}"
    return said


def left_out_note(iterations: list[dict[str, Any]]) -> str:
    """The values iterations left out (their fingerprint's notes: a mark that names no
    metric, memory the device did not give), most frequent first; "" for none. The values
    they kept stand, so nothing of this is set aside: said, or it would be seen only in the
    JSON and the log."""
    counts: dict[str, int] = {}
    with_notes = 0
    for it in iterations:
        notes = (it.get("fingerprint") or {}).get("notes") or []
        with_notes += bool(notes)
        for note in notes:
            counts[note] = counts.get(note, 0) + 1
    if not counts:
        return ""
    shown = sorted(counts.items(), key=lambda kv: -kv[1])[:_NOTES_SHOWN]
    more = len(counts) - len(shown)
    text = "; ".join(f"{n}x {note}" for note, n in shown) + (f"; {more} more" if more else "")
    plural = "" if with_notes == 1 else "s"
    return f"values left out in {with_notes} iteration{plural}: {text} (each one's in --json)"


_NOTES_SHOWN = 3
_SUMMARY_COLUMNS = ("n", "mean", "median", "stddev", "CoV", "min", "max", "p95")
_VERDICT_COLOURS = {"regression": "red", "improvement": "green", "no change": "cyan"}


def _summary_cells(s: dict[str, Any] | None) -> list[str]:
    """One summary's cells; dashes for a variant that did not report the metric."""
    if s is None:
        return ["-"] * len(_SUMMARY_COLUMNS)
    return [
        str(s["n"]),
        *(_number(s[k]) for k in ("mean", "median", "stddev")),
        "-" if s["cov"] is None else f"{100 * s['cov']:.1f}%",  # None: a mean of zero
        *(_number(s[k]) for k in ("min", "max", "p95")),
    ]


def _comparison_cells(s: dict[str, Any]) -> list[str]:
    """An A/B metric's change of new against base and its verdict; dashes when only one
    variant reported the metric (there is no comparison)."""
    verdict = s.get("verdict")
    if not isinstance(verdict, str):
        return ["-", "-"]
    change = "-"
    bounds: list[Any] = [s.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high")]
    if all(isinstance(x, int | float) and x == x for x in bounds):  # not missing, not NaN
        ratio, low, high = (100 * (x - 1) for x in bounds)
        change = f"{ratio:+.2f}% [{low:+.2f}%, {high:+.2f}%]"
    return [change, f"[{_VERDICT_COLOURS.get(verdict, 'yellow')}]{markup(verdict)}[/]"]


def _number(x: float | None) -> str:
    """Four significant digits, without switching to exponents below 1e16; a dash for a figure
    that is not defined (null: a spread that overflowed, say)."""
    if not isinstance(x, int | float) or isinstance(x, bool) or not math.isfinite(x):
        return "-"
    return f"{x:.0f}" if 10_000 <= abs(x) < 1e16 else f"{x:.4g}"


CSV_HEADER = ("job_id", "attempt", "iteration", "warmup", "metric", "value", "error",
              "variant", "set_aside")  # fmt: skip


def write_csv(iterations: list[dict[str, Any]], out: TextIO) -> None:
    """One row per iteration and metric (one with an empty metric for an iteration without
    values). `variant` tells an A/B job's base and new rows apart; `set_aside` holds why the
    iteration was kept out of the summary (its flags), empty for one that counts. Columns
    added later go at the end, so a reader by position keeps working."""
    writer = csv.writer(out)
    writer.writerow(CSV_HEADER)
    for it in iterations:
        common = [it["job_id"], it["attempt"], it["index"], it["warmup"]]
        tail = [it["error"], it.get("variant", ""), _set_aside_reason(it)]
        for metric, value in sorted(it["values"].items()) or [("", "")]:
            writer.writerow([*common, metric, value, *tail])


def _set_aside_reason(iteration: dict[str, Any]) -> str:
    """Why an iteration was set aside, its flags joined; "" when it was not (a flagged
    iteration kept, with `set_aside_flagged` off, counts: its flags are not a reason here)."""
    if not iteration.get("set_aside"):
        return ""
    return "; ".join(iteration.get("flags") or []) or "set aside"

"""`labd compare`, `labd detect` and `labd calibrate`: statistics on files or stored jobs."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from labd.cli.result_table import console_for, require_raw_values, terminal_columns
from labd.cli.text import markup, shown
from labd.errors import EXIT_NEGATIVE, UsageError
from labd.stats import Samples, read_sample_file, read_samples, samples_from_results
from labd.visible import quoted


def _input_path(arg: str) -> Path:
    """A file argument: `-` is standard input."""
    return Path("/dev/stdin" if arg == "-" else arg)


def _samples(arg: str, args: argparse.Namespace) -> tuple[Samples, dict[str, Any] | None]:
    """A file, or else the id of a job the running daemon knows (JOB@base or JOB@new: one
    side of an A/B job); with the job's results when there are any (a result JSON or a job)."""
    path = _input_path(arg)
    # A job id never holds "/" (labd.model.ids): anything path-like is a file, missing or not
    # (or a pipe: <(labd jobs results ID --format json)).
    if path.exists() or "/" in arg or path.suffix in (".csv", ".json", ".txt"):
        samples, results = read_sample_file(path)
        return samples, None if results is None else _records(results, samples.source)
    from labd.cli.client import Client
    from labd.report import one_variant

    job_id, _, variant = arg.partition("@")
    results = Client.from_args(args).results(job_id)
    require_raw_values(results, f"job {job_id}")
    if variant:
        _check_ab_job(results, arg, job_id)
        results = one_variant(results, variant, arg)
    return samples_from_results(results, f"job {arg}"), results


def _check_ab_job(results: dict[str, Any], arg: str, job_id: str) -> None:
    """JOB@base and JOB@new name a side of an A/B job; any other job has no sides (it was
    refused as having "no measured iteration with values")."""
    spec = results.get("job", {}).get("spec") or {}
    if not spec.get("ab") and not any(it.get("variant") for it in results["iterations"]):
        raise UsageError(
            f"{arg}: job {job_id} is not an A/B job, so it has no base and new sides; "
            f"compare the whole job as {job_id}"
        )


def _records(results: dict[str, Any], name: str) -> dict[str, Any]:
    """A result JSON whose iterations are whole records, as `labd jobs results` writes them
    (what the comparison says beside its verdicts reads their conditions and flags)."""
    from pydantic import ValidationError

    from labd.model import Iteration

    for number, record in enumerate(results["iterations"]):
        try:
            Iteration.model_validate(record)
        except ValidationError as e:
            problem = e.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise UsageError(
                f"{name}: iteration {number}: {where}: {problem['msg']} (expected the JSON of "
                "`labd jobs results ID --format json`)"
            ) from None
    return results


def compare(args: argparse.Namespace) -> int:
    (base, base_results), (new, new_results) = _samples(args.base, args), _samples(args.new, args)
    # Imported once the files are read: SciPy and the runner take a second or two, and a file
    # refused on its first line is refused at once.
    from labd.report import comparability
    from labd.stats import compare as run_compare

    shared, missing = _metrics_to_compare(base, new, args.metric)
    direction = {
        # The new job's, as every comparison reads it; where the base's differs, the context
        # printed below says so.
        m: args.higher_is_better or new.higher_is_better.get(m, base.higher_is_better.get(m, False))
        for m in shared
    }
    results = run_compare(
        {m: (base.values[m], new.values[m], direction[m]) for m in shared},
        effect=args.effect,
        alpha=args.alpha,
        fdr=not args.no_fdr,
        method=args.method,
    )
    context = comparability(base_results, new_results)
    context["conditions_differ"] += _units_differ(base, new, shared)
    context["missing"] = missing
    context["not_succeeded"] = _not_succeeded({"base": base_results, "new": new_results})
    if args.json:
        print(json.dumps({"metrics": [r.as_dict() for r in results], **context}, indent=2))
        # stdout stays one JSON document; what makes the verdicts partial is said on stderr too.
        for line in _warnings(context):
            print(line, file=sys.stderr)
    else:
        _print_comparison(results, args)
        _print_context(context)
    return EXIT_NEGATIVE if any(r.verdict == "regression" for r in results) else 0


def _metrics_to_compare(
    base: Samples, new: Samples, wanted: list[str] | None
) -> tuple[list[str], dict[str, list[str]]]:
    """The metrics both sides have (of those --metric asks for), and those left out because
    one side lacks them: {"base": missing from base, "new": missing from new}."""
    known = f"base has {_listed(base.values)}, new has {_listed(new.values)}"
    for metric in wanted or []:
        if metric not in base.values and metric not in new.values:
            raise UsageError(f"--metric {quoted(metric)}: in neither base nor new ({known})")

    def asked(metric: str) -> bool:
        return not wanted or metric in wanted

    shared = [m for m in base.values if m in new.values and asked(m)]
    missing = {
        "base": sorted(m for m in new.values if m not in base.values and asked(m)),
        "new": sorted(m for m in base.values if m not in new.values and asked(m)),
    }
    if shared:
        return shared, missing
    if wanted:
        lacks = "; ".join(
            f"{quoted(m)} is missing from {side}" for side in missing for m in missing[side]
        )
        raise UsageError(f"nothing to compare: {lacks} ({known})")
    raise UsageError(f"no metric in common: {known}")


def _listed(names: Iterable[str], most: int = 10) -> str:
    """Metric names for a message; a file may hold 1,000 of them."""
    ordered = sorted(names)
    if len(ordered) <= most:
        return str(ordered)
    return f"[{', '.join(map(repr, ordered[:most]))}, ...] ({len(ordered):,} in all)"


def _units_differ(base: Samples, new: Samples, compared: list[str]) -> list[str]:
    """Compared metrics whose result JSONs declare different units (a CSV declares none)."""
    return [
        f"unit of {m}: {quoted(base.units[m])} -> {quoted(new.units[m])} (the values are "
        "compared as they are)"
        for m in compared
        if m in base.units and m in new.units and base.units[m] != new.units[m]
    ]


def _not_succeeded(sides: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, str]]:
    """Each side that is a job (or its result JSON) that did not succeed: {side: {"job",
    "state", "error"}}. Its values may be partial: a failed run stops early."""
    found = {}
    for side, results in sides.items():
        job = (results or {}).get("job") or {}
        state = job.get("state")
        if isinstance(state, str) and state != "succeeded":
            error = job.get("error")
            found[side] = {
                "job": str(job.get("id") or "?"),
                "state": state,
                "error": error if isinstance(error, str) else "",
            }
    return found


def _warnings(context: dict[str, Any]) -> list[str]:
    """What makes the verdicts partial: a job that did not succeed, metrics one side lacks."""
    lines = []
    for side, job in context["not_succeeded"].items():
        error = f" ({job['error']})" if job["error"] else ""
        lines.append(
            f"warning: {side}: job {job['job']} did not succeed (state {job['state']}): its "
            f"values may be partial{error}"
        )
    for side, metrics in context["missing"].items():
        if metrics:
            lines.append(f"warning: not compared, missing from {side}: {', '.join(metrics)}")
    return [shown(line) for line in lines]


def _print_comparison(results: list[Any], args: argparse.Namespace) -> None:
    from rich.table import Table

    colour = {"regression": "red", "improvement": "green", "no change": "cyan"}
    table = Table(
        title=f"{markup(args.base)} -> {markup(args.new)} "
        f"(effect of interest {100 * args.effect:g}%)"
    )
    for column in ("metric", "base", "new", "change [95% CI]", "verdict", "method"):
        table.add_column(
            column,
            justify="left" if column in ("metric", "verdict") else "right",
            no_wrap=column != "metric",  # an interval on two lines reads as two numbers
        )
    for r in results:
        change = "-"
        if r.ratio == r.ratio:  # not NaN
            change = (
                f"{100 * (r.ratio - 1):+.2f}% "
                f"[{100 * (r.ratio_ci_low - 1):+.2f}%, {100 * (r.ratio_ci_high - 1):+.2f}%]"
            )
        elif r.estimate == r.estimate and r.ci_low == r.ci_low:  # from a baseline of 0
            change = f"{r.estimate:+.4g} [{r.ci_low:+.4g}, {r.ci_high:+.4g}]"
        verdict = f"[{colour.get(r.verdict, 'yellow')}]{markup(r.verdict)}[/]"
        table.add_row(
            markup(r.metric),
            _spread(r.base, r.location),
            _spread(r.new, r.location),
            change,
            verdict,
            markup(r.method or "-"),
        )
    console = console_for(table, terminal_columns())
    console.print(table)
    for r in results:
        if r.reason and r.verdict == "inconclusive":
            console.print(f"[yellow]{markup(r.metric)}[/]: {markup(r.reason)}")
        for d in r.diagnostics:
            console.print(
                f"[yellow]{markup(r.metric)}[/] ({markup(d['sample'])}): {markup(d['message'])}. "
                f"{markup(d['hint'])}."
            )


def _print_context(context: dict[str, Any]) -> None:
    for line in _warnings(context):
        print(line)
    for side in ("base", "new"):
        aside = context["set_aside"].get(side)
        if aside and aside["count"]:
            reasons = "; ".join(f"{n}x {r}" for r, n in aside["reasons"].items())
            print(f"{side}: {aside['count']} iterations set aside ({shown(reasons)})")
    if context["conditions_differ"]:
        print("conditions differ between base and new (the comparison may not be fair):")
        for line in context["conditions_differ"]:
            print(f"  {shown(line)}")


def _spread(summary: Any, location: str) -> str:
    """The location the change compares (mean ± sd for Welch's, else median ± MAD): shown
    beside a change of the means, medians could move the other way."""
    if summary is None:
        return "-"
    spread = summary.stddev if location == "mean" else summary.mad
    spread_text = f"{spread:.2g}" if spread == spread else "-"  # NaN: one value has none
    if location == "mean":
        return f"mean {summary.mean:.4g} ± {spread_text} n={summary.n}"
    return f"median {summary.median:.4g} ± {spread_text} n={summary.n}"


def detect(args: argparse.Namespace) -> int:
    from labd.stats import read_history

    if args.file and (args.suite or args.test):
        raise UsageError("give a history file or --suite and --test, not both")
    directions: dict[str, bool] = {}  # series: higher is better (a file's: lower)
    if args.file:
        history = read_history(_input_path(args.file))
        source = args.file
    elif args.suite and args.test:
        history, directions = _stored_history(args)
        source = f"{args.suite}/{args.test} in the store"
    else:
        raise UsageError("give a history file, or --suite and --test for the stored history")
    from labd.stats import REACH
    from labd.stats import detect as run_detect  # SciPy: once the history is read

    reach = REACH[args.method]
    alerts: list[dict[str, Any]] = []
    judged: list[dict[str, Any]] = []
    for name, (builds, values) in history.items():
        higher_is_better = args.higher_is_better or directions.get(name, False)
        found = [
            {
                "series": name,
                "build": builds[a.index],
                "verdict": _verdict(a.direction, higher_is_better),
                **a.as_dict(),
            }
            for a in run_detect(values, args.method)
        ]
        alerts.extend(found)
        monitored = reach.first_dated if len(values) > reach.first_dated else None
        judged.append(
            {
                "series": name,
                "builds": len(values),
                # Too short for the method to raise any alert is not "no change" (an alert
                # raised shows the history was long enough, whatever REACH says).
                "judged": bool(found) or len(values) >= reach.fewest_builds,
                "monitored_from": monitored,
                "monitored_from_build": None if monitored is None else builds[monitored],
                "alerts": len(found),
                "regressions": sum(a["verdict"] == "regression" for a in found),
                "higher_is_better": higher_is_better,
            }
        )
    if args.json:
        print(
            json.dumps(
                {
                    "alerts": alerts,
                    "series": judged,
                    "method": args.method,
                    "first_dated": reach.first_dated,
                    "fewest_builds": reach.fewest_builds,
                },
                indent=2,
            )
        )
    else:
        _print_detection(source, args.method, alerts, judged)
    # Exit 1 only for a regression, as `labd compare`: a CI gate must not fail on an
    # improvement. A series too short to judge is no usage error (every new test's history
    # starts short): it is said per series, and in JSON by `judged`.
    return EXIT_NEGATIVE if any(a["verdict"] == "regression" for a in alerts) else 0


SERIES_NAMED = 20  # series without a change named one by one; more are counted


def _print_detection(
    source: str, method: str, alerts: list[dict[str, Any]], judged: list[dict[str, Any]]
) -> None:
    from rich.console import Console
    from rich.table import Table

    from labd.stats import REACH

    reach = REACH[method]
    columns = terminal_columns()
    console = Console(width=columns or 110)
    if alerts:
        table = Table(title=f"{markup(source)}: {len(judged)} series, method {markup(method)}")
        for column in (
            "series",
            "first build",
            "index",
            "raised at",
            "verdict",
            "change [95% CI]",
            "conf.",
        ):
            table.add_column(column)
        for a in alerts:
            early = a["index"] == reach.first_dated  # a change in the builds before may be it
            table.add_row(
                markup(a["series"]),
                markup(a["build"]),
                f"{a['index']}{'*' if early else ''}",
                str(a["raised_at"]),
                f"[{VERDICT_COLOUR[a['verdict']]}]{a['verdict']}[/]",
                markup(_detected_change(a), lines=True),
                "-" if a["confidence"] is None else f"{a['confidence']:.3f}",
            )
        console = console_for(table, columns)
        console.print(table)
        if any(a["index"] == reach.first_dated for a in alerts):
            console.print(
                f"* dated at the first build monitored: the change may have begun within the "
                f"{reach.first_dated} builds before it, which set the reference level"
            )
    before = f"the {reach.first_dated} builds before it set the reference level"
    quiet = [s for s in judged if s["judged"] and not s["alerts"]]
    if len(quiet) > SERIES_NAMED:  # a file of 10,000 series: one line for the quiet ones
        console.print(
            f"{len(quiet):,} series: no change found; each monitored from index "
            f"{reach.first_dated} on ({before})"
        )
        judged = [s for s in judged if s not in quiet]
    for s in judged:
        name = markup(s["series"])
        if not s["judged"]:
            console.print(
                f"{name}: {s['builds']} build{'s' if s['builds'] != 1 else ''}, too few to "
                f"judge ({markup(method)} needs {reach.fewest_builds}: its first "
                f"{reach.first_dated} set the reference level, and a change is confirmed by "
                "the builds after it)"
            )
            continue
        found = (
            f"{s['alerts']} change{'s' if s['alerts'] != 1 else ''} ({s['regressions']} "
            f"regression{'s' if s['regressions'] != 1 else ''}; {_better(s['higher_is_better'])})"
            if s["alerts"]
            else "no change found"
        )
        where = f"build {markup(s['monitored_from_build'])} (index {s['monitored_from']})"
        console.print(f"{name}: {found}; monitored from {where} on ({before})")


VERDICT_COLOUR = {"regression": "red", "improvement": "green"}


def _verdict(direction: str, higher_is_better: bool) -> str:
    return "improvement" if (direction == "up") == higher_is_better else "regression"


def _better(higher_is_better: bool) -> str:
    return "higher is better" if higher_is_better else "lower is better"


def _detected_change(alert: dict[str, Any]) -> str:
    """The change relative to the level before, or, where that is undefined (a level of 0, or
    one within its own interval of 0), the absolute change in the series' unit."""
    if alert["magnitude"] is not None:
        return (
            f"{100 * alert['magnitude']:+.1f}% [{_percent(alert['magnitude_low'])}, "
            f"{_percent(alert['magnitude_high'])}]"
        )
    level = alert["level_before"]
    why = (
        "the level before was 0"
        if level == 0
        else f"the level before, {level:.4g}, is within its interval of 0"
    )
    # On a line of its own: the numbers stay on one line (an interval on two reads as two
    # numbers), the label wraps where the terminal is narrow.
    return (
        f"{_signed(alert['absolute_change'])} [{_signed(alert['absolute_change_low'])}, "
        f"{_signed(alert['absolute_change_high'])}]\n(absolute; {why})"
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}"


WELL_KNOWN_PILOT = 30  # values: its answer is then within 0.63 to 1.8 times the truth
RESOLVED_FAILURES = 5  # misses a detection rate's draws must leave room for, to be measured


def calibrate(args: argparse.Namespace) -> int:
    if args.draws < (need := math.ceil(RESOLVED_FAILURES / (1 - args.detection))):
        raise UsageError(
            f"--detection {args.detection:g} needs --draws of at least {need:,}, not "
            f"{args.draws:,}: a detection rate is measured by its misses, and at that rate "
            f"{need:,} draws leave {RESOLVED_FAILURES} of them (at most 2,000 draws: a rate "
            f"up to {1 - RESOLVED_FAILURES / 2000:.2%})"
        )
    samples = read_samples(Path(args.file))
    from labd.stats import calibrate as run_calibrate  # SciPy: once the pilot is read

    try:
        results = [
            run_calibrate(name, values, effect=args.effect, target=args.detection, draws=args.draws)
            for name, values in samples.values.items()
        ]
    except ValueError as e:  # a pilot it cannot use: too short, around 0
        raise UsageError(f"{args.file}: {e}") from None
    if args.json:
        print(json.dumps({"components": [r.as_dict() for r in results]}, indent=2))
        return 0
    for r in results:
        needed = str(r.n) if r.n else f"more than {max(r.power)}"
        print(
            f"{shown(r.component)}: {needed} iterations per side to detect {100 * args.effect:g}% "
            f"{100 * args.detection:g}% of the time ({r.klass}, CoV {100 * r.cov:.2f}%, "
            f"{r.method}, pilot of {r.pilot_n})"
        )
        if r.pilot_n < WELL_KNOWN_PILOT and r.n_low is not None:
            high = str(r.n_high) if r.n_high else f"more than {r.largest}"
            print(
                f"  a pilot of {r.pilot_n} knows its noise only roughly: {r.n_low} to {high} "
                f"for the noise it allows (95%); a pilot of {WELL_KNOWN_PILOT} or more narrows it"
            )
        for finding in r.findings:
            print(f"  pilot: {shown(finding)}")
    return 0


def _stored_history(
    args: argparse.Namespace,
) -> tuple[dict[str, tuple[list[str], list[float]]], dict[str, bool]]:
    """(each series' builds and values, each series' direction: higher is better)."""
    from labd.cli.client import Client
    from labd.stats import refusal

    answer = Client.from_args(args).history(args.suite, args.test)
    if not answer["series"]:
        raise UsageError(f"no succeeded job of {args.suite}/{args.test} in the store")
    for name, s in answer["series"].items():
        # Stored before the runner refused such values (1e300): named, as a file's would be.
        for build, job, value in zip(s["builds"], s["jobs"], s["values"], strict=True):
            if reason := refusal(value):
                raise UsageError(
                    f"{shown(name)}: job {shown(job)} (build {shown(build)}): {reason}; this"
                    " history cannot be analysed"
                )
    series = answer["series"]
    return (
        {name: (s["builds"], s["values"]) for name, s in series.items()},
        {name: s.get("higher_is_better") is True for name, s in series.items()},
    )

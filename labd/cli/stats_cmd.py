"""`labd compare`, `labd detect` and `labd calibrate`: statistics on files or stored jobs."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from labd.cli.text import markup, shown
from labd.errors import EXIT_NEGATIVE, UsageError
from labd.stats import Samples, read_sample_file, read_samples, samples_from_results


def _samples(arg: str, args: argparse.Namespace) -> tuple[Samples, dict[str, Any] | None]:
    """A file, or else the id of a job the running daemon knows (JOB@base or JOB@new: one
    side of an A/B job); with the job's results when there are any (a result JSON or a job)."""
    path = Path(arg)
    # A job id never holds "/" (labd.model.ids): anything path-like is a file, missing or not
    # (or a pipe: <(labd jobs results ID --format json)).
    if path.exists() or "/" in arg or path.suffix in (".csv", ".json", ".txt"):
        samples, results = read_sample_file(path)
        return samples, None if results is None else _records(results, path.name)
    from labd.cli.client import Client
    from labd.report import one_variant

    job_id, _, variant = arg.partition("@")
    results = Client.from_args(args).results(job_id)
    if variant:
        results = one_variant(results, variant, arg)
    return samples_from_results(results, f"job {arg}"), results


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

    shared = [m for m in base.values if m in new.values]
    if args.metric:
        shared = [m for m in shared if m in args.metric]
    if not shared:
        raise UsageError(
            f"no metric in common: base has {sorted(base.values)}, new has {sorted(new.values)}"
        )
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
    if args.json:
        print(json.dumps({"metrics": [r.as_dict() for r in results], **context}, indent=2))
    else:
        _print_comparison(results, args)
        _print_context(context)
    return EXIT_NEGATIVE if any(r.verdict == "regression" for r in results) else 0


def _print_comparison(results: list[Any], args: argparse.Namespace) -> None:
    from rich.console import Console
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
        verdict = f"[{colour.get(r.verdict, 'yellow')}]{markup(r.verdict)}[/]"
        table.add_row(
            markup(r.metric),
            _spread(r.base),
            _spread(r.new),
            change,
            verdict,
            markup(r.method or "-"),
        )
    console = Console(width=max(110, Console().width))
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
    for side in ("base", "new"):
        aside = context["set_aside"].get(side)
        if aside and aside["count"]:
            reasons = "; ".join(f"{n}x {r}" for r, n in aside["reasons"].items())
            print(f"{side}: {aside['count']} iterations set aside ({shown(reasons)})")
    if context["conditions_differ"]:
        print("conditions differ between base and new (the comparison may not be fair):")
        for line in context["conditions_differ"]:
            print(f"  {shown(line)}")


def _spread(summary: Any) -> str:
    if summary is None:
        return "-"
    return f"{summary.median:.4g} ± {summary.mad:.2g} n={summary.n}"


def detect(args: argparse.Namespace) -> int:
    from labd.stats import read_history

    if args.file and (args.suite or args.test):
        raise UsageError("give a history file or --suite and --test, not both")
    if args.file:
        history = read_history(Path(args.file))
        source = args.file
    elif args.suite and args.test:
        history = _stored_history(args)
        source = f"{args.suite}/{args.test} in the store"
    else:
        raise UsageError("give a history file, or --suite and --test for the stored history")
    from labd.stats import detect as run_detect  # SciPy: once the history is read

    alerts = []
    for name, (builds, values) in history.items():
        for alert in run_detect(values, args.method):
            alerts.append({"series": name, "build": builds[alert.index], **alert.as_dict()})
    if args.json:
        print(json.dumps({"alerts": alerts}, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{markup(source)}: {len(history)} series, method {args.method}")
        for column in ("series", "first build", "index", "raised at", "change [95% CI]", "conf."):
            table.add_column(column)
        for a in alerts:
            table.add_row(
                markup(a["series"]),
                markup(a["build"]),
                str(a["index"]),
                str(a["raised_at"]),
                f"{100 * a['magnitude']:+.1f}% [{100 * a['magnitude_low']:+.1f}%, "
                f"{100 * a['magnitude_high']:+.1f}%]",
                f"{a['confidence']:.3f}",
            )
        Console(width=max(110, Console().width)).print(table if alerts else "no change found")
    return EXIT_NEGATIVE if alerts else 0


def calibrate(args: argparse.Namespace) -> int:
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
    return 0


def _stored_history(args: argparse.Namespace) -> dict[str, tuple[list[str], list[float]]]:
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
    return {name: (s["builds"], s["values"]) for name, s in answer["series"].items()}

"""`labd submit` and `labd jobs list|show|cancel|results`."""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlencode

from labd.cli.client import Client
from labd.cli.text import markup, shown
from labd.config import Settings, load_config
from labd.errors import EXIT_NEGATIVE, EXIT_OK, EXIT_RUNTIME, LabdError, UsageError
from labd.model import TERMINAL as TERMINAL_STATES
from labd.model import TestSpec, load_manifest
from labd.stats import json_text

TERMINAL = {state.value for state in TERMINAL_STATES}


def _client(args: argparse.Namespace, wait: float = 0.0) -> Client:
    return Client.from_args(args, wait)


def submit(args: argparse.Namespace) -> int:
    """Validate a manifest locally, submit it, and optionally follow it to the end."""
    path = Path(args.file)
    spec = load_manifest(path)
    settings = load_config(args.config).settings
    if args.via == "mqtt" or (args.via == "auto" and settings.mqtt.enabled):
        return _submit_over_mqtt(args, settings, spec, path.name)
    client = _client(args, wait=args.connect_wait)
    # No submitter: the daemon takes it from the credential (the account, or the token).
    body = {"spec": wire_spec(spec), "id": args.id or "", "source": path.name}
    answer = client.call("POST", "/jobs", body)
    job = answer["job"]
    if answer.get("created") is False:
        raise UsageError(f"job {job['id']} exists: {job['state']}")
    if not args.wait:
        _print(args, {"job": job}, lambda: print(f"queued {shown(job['id'])}"))
        return 0
    job = _follow(client, job["id"], quiet=args.json)
    results = client.results(job["id"])
    _print(args, results, lambda: _print_results(results))
    return waited_status(job["state"], results.get("summary") or {})


def waited_status(state: str, summary: dict[str, Any]) -> int:
    """`submit --wait`'s exit status: 3 for a job that did not succeed; 1 when an A/B job's
    comparison found a regression (a negative verdict, as `labd compare` exits); else 0."""
    if state != "succeeded":
        return EXIT_RUNTIME
    return EXIT_NEGATIVE if regressed(summary) else EXIT_OK


def regressed(summary: dict[str, Any]) -> bool:
    """Whether any metric of an A/B job's summary has the verdict "regression" (a plain job's
    summary has no verdicts)."""
    return any(isinstance(s, dict) and s.get("verdict") == "regression" for s in summary.values())


def wire_spec(spec: TestSpec) -> dict[str, Any]:
    """The spec as the manifest wrote it, checked here but without the defaults: a daemon of
    another version fills in its own (sent whole, a key new to this CLI was refused by an
    older daemon as one the user's file held)."""
    return spec.model_dump(mode="json", exclude_unset=True)


def _submit_over_mqtt(
    args: argparse.Namespace, settings: Settings, spec: TestSpec, source: str
) -> int:
    import asyncio

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from labd.cli import mqtt_client

    total = spec.warmup + spec.iterations
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        transient=True,
        disable=args.json or not sys.stderr.isatty(),
    ) as progress:
        task = progress.add_task("submitting", total=total)

        def show(event: dict[str, Any]) -> None:
            done = event["data"].get("index", -1) + 1 if event["kind"] == "iteration" else None
            progress.update(
                task, description=markup(f"{event['job_id'][:12]} {event['state']}"), completed=done
            )

        outcome = asyncio.run(
            mqtt_client.submit_and_follow(
                settings,
                wire_spec(spec),
                args.id or "",
                source,
                args.wait,
                args.connect_wait,
                show,
            )
        )
    events, result = outcome["events"], outcome["result"]
    if args.json:
        print(json_text(outcome, indent=2))
    elif not args.wait:
        print(f"queued {shown(outcome['job_id'])}")
    else:
        leased = [e for e in events if e["kind"] == "leased"]
        finished = events[-1]
        job = {
            "spec": spec.model_dump(mode="json"),
            "state": finished["state"],
            "error": finished["data"].get("error", ""),
            "device_id": leased[-1]["data"]["device_id"] if leased else "",
        }
        _print_results({"job": job, "summary": (result or {}).get("summary", {})})
    if not args.wait:
        return 0
    return waited_status(events[-1]["state"], (result or {}).get("summary") or {})


def _follow(client: Client, job_id: str, quiet: bool) -> dict[str, Any]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        transient=True,
        disable=quiet or not sys.stderr.isatty(),
        console=None,
    ) as progress:
        task = progress.add_task(markup(job_id[:12]), total=None)
        while True:
            job = client.call("GET", f"/jobs/{quote(job_id, safe='')}")["job"]
            progress.update(
                task,
                total=job["iterations_total"],
                completed=job["iterations_done"],
                description=markup(f"{job_id[:12]} {job['state']}"),
            )
            if job["state"] in TERMINAL:
                return dict(job)
            time.sleep(0.3)


def _print_results(results: dict[str, Any]) -> None:
    """A job's result table on stdout, fitted to the terminal; whole when stdout is not one."""
    print_result_table(results, _terminal_columns())


def _terminal_columns() -> int | None:
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
    from rich.console import Console

    table, left_out = _fitted_table(results, columns)
    # Never narrower than the table: rich's last resort for a wide table is to cut every cell.
    console = Console(width=max(_width_of(table), columns or _LOG_COLUMNS))
    console.print(table)
    if left_out:
        console.print(f"[dim]left out to fit: {', '.join(left_out)} (all in --json)")
    for note in _notes(results):
        console.print(note)


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
    if aside := set_aside_note(results.get("set_aside")):
        notes.append(f"[yellow]{markup(aside)}[/]")
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
        for metric, s in results["summary"].items():
            table.add_row(markup(metric), "base", *cells(s.get("base")), "", "")
            table.add_row("", "new", *cells(s.get("new")), *_comparison_cells(s))
    else:
        for metric, s in results["summary"].items():
            table.add_row(markup(metric), *cells(s))
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


def _print(args: argparse.Namespace, data: Any, human: Any) -> None:
    if args.json:
        print(json_text(data, indent=2))  # an older daemon's NaN as null: strict JSON
    else:
        human()


def _over_mqtt(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    from labd.cli import mqtt_client

    return asyncio.run(mqtt_client.query(load_config(args.config).settings, request))


def list_jobs(args: argparse.Namespace) -> int:
    if args.via == "mqtt":
        request = {"query": "list", "states": args.state, "limit": args.limit}
        jobs = _over_mqtt(args, request)["jobs"]
    else:
        query = urlencode([("state", s) for s in args.state] + [("limit", args.limit)])
        jobs = _client(args).call("GET", f"/jobs?{query}")["jobs"]

    def human() -> None:
        print(f"{'JOB':<34} {'STATE':<10} {'SUITE/TEST':<30} {'DEVICE':<16} SUBMITTED")
        for job in jobs:
            spec = job["spec"]
            name = shown(f"{spec['suite']}/{spec['test']}")
            print(
                f"{shown(job['id']):<34} {shown(job['state']):<10} {name:<30} "
                f"{shown(job['device_id'] or '-'):<16} {shown(job['submitted_at'])}"
            )

    _print(args, {"jobs": jobs}, human)
    return 0


def show(args: argparse.Namespace) -> int:
    if args.via == "mqtt":
        import asyncio

        from labd.cli import mqtt_client

        state = asyncio.run(mqtt_client.job_state(load_config(args.config).settings, args.id))
        _print(args, {"job": state}, lambda: print(shown(f"{state['job_id']}: {state['state']}")))
        return 0
    job = _client(args).call("GET", f"/jobs/{quote(args.id, safe='')}")["job"]

    def human() -> None:
        spec = job["spec"]
        print(f"job        {shown(job['id'])}")
        print(shown(f"test       {spec['suite']}/{spec['test']} ({spec['scenario']})"))
        print(f"state      {job['state']}  attempt {job['attempts']}/{spec['max_attempts']}")
        print(f"device     {shown(job['device_id'] or '-')}")
        print(f"progress   {job['iterations_done']}/{job['iterations_total']} iterations")
        if job.get("waiting"):
            print(f"waiting    {shown(job['waiting'])}")
            if job.get("queue_deadline"):  # not started by then: it times out
                print(f"deadline   {shown(job['queue_deadline'])}")
        if job["error"]:
            print(f"error      {shown(job['error'], lines=True)}")

    _print(args, {"job": job}, human)
    return 0


def cancel(args: argparse.Namespace) -> int:
    if args.via == "mqtt":
        import asyncio

        from labd.cli import mqtt_client

        asyncio.run(mqtt_client.cancel(load_config(args.config).settings, args.id))
        print(f"{shown(args.id)}: cancel sent (the job's events say when it took effect)")
        return 0
    job = _client(args).call("POST", f"/jobs/{quote(args.id, safe='')}/cancel")["job"]
    _print(
        args,
        {"job": job},
        lambda: print(
            f"{shown(job['id'])}: {job['state']}"
            + (" (cancel requested)" if job["state"] not in TERMINAL else "")
        ),
    )
    return 0


def results(args: argparse.Namespace) -> int:
    if args.via == "mqtt":
        request = {"query": "results", "job_id": args.id, "limit": 1000}
        data = _over_mqtt(args, request)
        while data.get("next") is not None:  # page by page, as the API does
            more = _over_mqtt(args, {**request, "offset": data["next"]})
            data["iterations"] += more["iterations"]
            data["next"] = more["next"]
    else:
        data = _client(args).results(args.id)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(json_text(data, indent=2))
    elif fmt == "csv":
        write_csv(data["iterations"], sys.stdout)
    elif fmt == "perfherder":
        from labd.perfherder import perfherder_line

        refuse_unless_succeeded(data["job"])
        print(perfherder_line(data, load_config(args.config).settings.perfherder))
    elif fmt == "table":
        _print_results(data)
    else:
        raise LabdError(f"unknown format {fmt!r}")
    return 0  # a regression is shown, not an error here: `submit --wait` and `compare` judge


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


def refuse_unless_succeeded(job: dict[str, Any]) -> None:
    """Only a succeeded job's results are exported to Perfherder, as the daemon writes its
    `job.log` line for a succeeded job only: a failed or cancelled run's figures would join
    the series as if they were good."""
    if job["state"] != "succeeded":
        raise UsageError(
            f"job {shown(job['id'])} is {shown(job['state'])}: only a succeeded job is exported "
            "to Perfherder (its raw values: --format csv or json)"
        )

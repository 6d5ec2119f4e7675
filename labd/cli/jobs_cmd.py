"""`labd submit` and `labd jobs list|show|cancel|results`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from labd.cli.client import Client
from labd.cli.result_table import print_results as _print_results
from labd.cli.result_table import removal_note, require_raw_values, write_csv
from labd.cli.text import markup, shown
from labd.config import Settings, load_config
from labd.errors import EXIT_NEGATIVE, EXIT_OK, EXIT_RUNTIME, LabdError, UsageError
from labd.model import TERMINAL as TERMINAL_STATES
from labd.model import TestSpec, load_manifest
from labd.perfherder import perfherder_line
from labd.stats import json_text

TERMINAL = {state.value for state in TERMINAL_STATES}


def _api_url_asked(args: argparse.Namespace) -> str:
    """The daemon elsewhere the user named (--api-url, $LABD_API_URL): a request for it goes
    to its API, never over this configuration's broker to whichever lab that is. UsageError
    with --via mqtt, which cannot reach it."""
    url = getattr(args, "api_url", None) or os.environ.get("LABD_API_URL", "")
    if url and getattr(args, "via", "") == "mqtt":
        raise UsageError(
            f"--via mqtt uses this configuration's broker, not the daemon at {url} "
            "(--api-url or $LABD_API_URL): leave out one of the two"
        )
    return url


def _via_mqtt(args: argparse.Namespace) -> bool:
    """--via mqtt, refused with a daemon named elsewhere."""
    _api_url_asked(args)
    return bool(args.via == "mqtt")


def _client(args: argparse.Namespace, wait: float = 0.0) -> Client:
    return Client.from_args(args, wait)


def submit(args: argparse.Namespace) -> int:
    """Validate a manifest locally, submit it, and optionally follow it to the end."""
    path = Path(args.file)
    spec = load_manifest(path)
    settings = load_config(args.config).settings
    elsewhere = _api_url_asked(args)
    if args.via == "mqtt" or (args.via == "auto" and settings.mqtt.enabled and not elsewhere):
        return _submit_over_mqtt(args, settings, spec, path.name)
    client = _client(args, wait=args.connect_wait)
    # No submitter: the daemon takes it from the credential (the account, or the token).
    body = {"spec": wire_spec(spec), "id": args.id or "", "source": path.name}
    answer = client.call("POST", "/jobs", body)
    job = answer["job"]
    exists = answer.get("created") is False  # submitted before: harmless, and followed
    if not args.wait:
        said = _exists(job["id"], job["state"]) if exists else f"queued {shown(job['id'])}"
        _print(args, {"job": job, "duplicate": exists}, lambda: print(said))
        return 0
    if exists and not args.json:
        print(_exists(job["id"], job["state"]), file=sys.stderr)
    job = _follow(client, job["id"], quiet=args.json)
    results = client.results(job["id"])
    _print(args, results, lambda: _print_results(results))
    return waited_status(job["state"], results.get("summary") or {})


def _table_from_events(
    spec: TestSpec, events: list[dict[str, Any]], result: dict[str, Any]
) -> dict[str, Any]:
    """A result table's data from what `submit --wait` followed over MQTT: the job's events
    and the result message (the summary, what was set aside), without the raw values."""
    leased = [e for e in events if e["kind"] == "leased"]
    job = {
        "spec": spec.model_dump(mode="json"),
        "state": events[-1]["state"],
        "error": events[-1]["data"].get("error", ""),
        "device_id": leased[-1]["data"]["device_id"] if leased else "",
    }
    return {"job": job, "summary": result.get("summary", {}), "set_aside": result.get("set_aside")}


def _exists(job_id: str, state: str) -> str:
    return f"job {shown(job_id)} exists ({state}): submitted before with this spec"


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
                lambda answer: _say_exists(args, answer),
            )
        )
    events, result = outcome["events"], outcome["result"]
    if outcome["duplicate"]:
        return _followed_duplicate(args, settings, outcome)
    if args.json:
        print(json_text(outcome, indent=2))
    elif not args.wait:
        print(f"queued {shown(outcome['job_id'])}")
    else:
        try:  # labd's whole results, as `jobs results` prints them: its notes read the values
            table = _results_over_mqtt(args, outcome["job_id"])
        except LabdError as e:  # the summary the events brought still makes the table
            print(f"labd: the notes under the table need the job's values: {e}", file=sys.stderr)
            table = _table_from_events(spec, events, result or {})
        _print_results(table)
    if not args.wait:
        return 0
    return waited_status(events[-1]["state"], (result or {}).get("summary") or {})


def _say_exists(args: argparse.Namespace, answer: dict[str, Any]) -> None:
    """A job followed with --wait that exists already: said as soon as labd answers, not
    once it has ended."""
    if answer.get("duplicate") and args.wait and not args.json:
        print(_exists(answer.get("job_id", ""), answer.get("state", "")), file=sys.stderr)


def _followed_duplicate(
    args: argparse.Namespace, settings: Settings, outcome: dict[str, Any]
) -> int:
    """A job submitted before with this id and spec: said so (with --wait, by _say_exists
    when labd answered); with --wait (followed to its end already), its results as labd has
    them."""
    import asyncio

    from labd.cli import mqtt_client

    said = _exists(outcome["job_id"], outcome["state"])
    if not args.wait:
        _print(args, outcome, lambda: print(said))
        return 0
    request = {"query": "results", "job_id": outcome["job_id"]}
    results = asyncio.run(mqtt_client.query(settings, request))
    _print(args, results, lambda: _print_results(results))
    return waited_status(results["job"]["state"], results.get("summary") or {})


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


def _print(args: argparse.Namespace, data: Any, human: Any) -> None:
    if args.json:
        print(json_text(data, indent=2))  # an older daemon's NaN as null: strict JSON
    else:
        human()


def _results_over_mqtt(args: argparse.Namespace, job_id: str) -> dict[str, Any]:
    """A job's whole results, asked of labd over MQTT page by page, as the API pages them."""
    request = {"query": "results", "job_id": job_id, "limit": 1000}
    data = _over_mqtt(args, request)
    while data.get("next") is not None:
        more = _over_mqtt(args, {**request, "offset": data["next"]})
        data["iterations"] += more["iterations"]
        data["next"] = more["next"]
    return data


def _over_mqtt(args: argparse.Namespace, request: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    from labd.cli import mqtt_client

    return asyncio.run(mqtt_client.query(load_config(args.config).settings, request))


def list_jobs(args: argparse.Namespace) -> int:
    if _via_mqtt(args):
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

    at_limit = len(jobs) >= args.limit  # 50 of 430 queued looked like the whole queue
    _print(args, {"jobs": jobs, "at_limit": at_limit}, human)
    if at_limit:  # on stderr, so --json's stdout stays one document
        print(
            f"labd: the newest {len(jobs)} shown, the limit; there may be more "
            f"(--limit N, at most 1000)",
            file=sys.stderr,
        )
    return 0


def show(args: argparse.Namespace) -> int:
    if _via_mqtt(args):
        import asyncio

        from labd.cli import mqtt_client

        settings = load_config(args.config).settings
        try:
            state = asyncio.run(mqtt_client.job_state(settings, args.id))
        except UsageError:
            # No retained state: the broker lost it (restarted without persistence), or no
            # such job. labd itself knows.
            job = _over_mqtt(args, {"query": "show", "job_id": args.id})["job"]
            _print(args, {"job": job}, lambda: print(shown(f"{job['id']}: {job['state']}")))
            return 0
        _print(args, {"job": state}, lambda: print(shown(f"{state['job_id']}: {state['state']}")))
        return 0
    job = _client(args).call("GET", f"/jobs/{quote(args.id, safe='')}")["job"]

    def human() -> None:
        spec = job["spec"]
        print(f"job        {shown(job['id'])}")
        print(shown(f"test       {spec['suite']}/{spec['test']} ({spec['scenario']})"))
        print(f"state      {job['state']}  attempt {job['attempts']}/{spec['max_attempts']}")
        print(f"device     {shown(job['device_id'] or '-')}")
        if removed := job.get("raw_values_removed"):
            print(f"progress   {removal_note(removed)}")
        else:
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
    if _via_mqtt(args):
        import asyncio

        from labd.cli import mqtt_client

        settings = load_config(args.config).settings
        asyncio.run(mqtt_client.cancel(settings, args.id))
        # The answer is ok for a job that had already ended too: its state says which.
        show = {"query": "show", "job_id": args.id}
        job = asyncio.run(mqtt_client.query(settings, show))["job"]
    else:
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
    if args.format == "perfherder" and not args.json:
        # The daemon's export, by its [perfherder] settings, as its job.log has it: this
        # command's own settings would name another series.
        if _via_mqtt(args):
            data = _over_mqtt(args, {"query": "perfherder", "job_id": args.id})
        else:
            data = _client(args).call("GET", f"/jobs/{quote(args.id, safe='')}/perfherder")
        print(perfherder_line(data["perfherder"]))
        return 0
    mqtt = _via_mqtt(args)
    data = _results_over_mqtt(args, args.id) if mqtt else _client(args).results(args.id)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        print(json_text(data, indent=2))
    elif fmt == "csv":
        require_raw_values(data, f"job {args.id}")  # a header alone would look like success
        write_csv(data["iterations"], sys.stdout)
    elif fmt == "table":
        _print_results(data)
    else:
        raise LabdError(f"unknown format {fmt!r}")
    return 0  # a regression is shown, not an error here: `submit --wait` and `compare` judge

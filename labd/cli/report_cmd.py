"""`labd report JOB [JOB2] -o report.html`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any
from urllib.parse import quote

from labd.cli.client import ApiError, Client
from labd.cli.result_table import require_raw_values
from labd.config import HttpSettings
from labd.errors import UsageError


def report(args: argparse.Namespace) -> int:
    from labd.report import render

    client = Client.from_args(args)
    first = client.results(args.job)
    second = client.results(args.job2) if args.job2 else None
    for results in (first, second):
        if results is not None:
            require_raw_values(results, f"job {results['job']['id']}")
    spec = (second or first)["job"]["spec"]
    history = client.history(spec["suite"], spec["test"])
    out = Path(args.output or f"report-{args.job}{'-' + args.job2 if args.job2 else ''}.html")
    kept = {
        results["job"]["id"]: _artefacts(client, results["job"]["id"])
        for results in (first, second)
        if results is not None
    }
    console = "" if client.api_url else console_url(client.settings.http)
    html = render(first, second, history, effect=args.effect, artefacts=kept, console=console)
    try:
        with out.open("w" if args.force else "x", encoding="utf-8") as file:
            file.write(html)
    except FileExistsError:
        raise UsageError(f"{out} exists; pass --force to replace it, or -o another file") from None
    except OSError as e:
        raise UsageError(f"{out}: cannot write: {e.strerror}") from e
    print(f"wrote {out}")
    return 0


def _artefacts(client: Client, job_id: str) -> list[dict[str, Any]]:
    """The files the job keeps on the daemon's host (none when that host has none)."""
    try:
        listing = client.call("GET", f"/jobs/{quote(job_id, safe='')}/artefacts")
    except ApiError:
        return []
    return list(listing.get("artefacts", []))


def console_url(http: HttpSettings) -> str:
    """The web console of the local daemon, where the report's evidence links lead."""
    if not http.console:
        return ""
    host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(http.host, http.host)
    return f"http://{f'[{host}]' if ':' in host else host}:{http.port}/console"

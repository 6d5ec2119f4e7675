"""`labd report JOB [JOB2] -o report.html`."""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlencode

from labd.cli.client import Client
from labd.config import load_config


def report(args: argparse.Namespace) -> int:
    from labd.report.html import render

    client = Client(load_config(args.config).settings.http)
    first = client.call("GET", f"/jobs/{args.job}/results")
    second = client.call("GET", f"/jobs/{args.job2}/results") if args.job2 else None
    spec = (second or first)["job"]["spec"]
    history = client.call(
        "GET", "/history?" + urlencode({"suite": spec["suite"], "test": spec["test"]})
    )
    out = Path(args.output)
    out.write_text(render(first, second, history, effect=args.effect), encoding="utf-8")
    print(f"wrote {out}")
    return 0

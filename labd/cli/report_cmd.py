"""`labd report JOB [JOB2] -o report.html`."""

from __future__ import annotations

import argparse
from pathlib import Path

from labd.cli.client import Client
from labd.errors import UsageError


def report(args: argparse.Namespace) -> int:
    from labd.report import render

    client = Client.from_args(args)
    first = client.results(args.job)
    second = client.results(args.job2) if args.job2 else None
    spec = (second or first)["job"]["spec"]
    history = client.history(spec["suite"], spec["test"])
    out = Path(args.output or f"report-{args.job}{'-' + args.job2 if args.job2 else ''}.html")
    html = render(first, second, history, effect=args.effect)
    try:
        with out.open("w" if args.force else "x", encoding="utf-8") as file:
            file.write(html)
    except FileExistsError:
        raise UsageError(f"{out} exists; pass --force to replace it, or -o another file") from None
    except OSError as e:
        raise UsageError(f"{out}: cannot write: {e.strerror}") from e
    print(f"wrote {out}")
    return 0

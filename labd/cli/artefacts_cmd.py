"""`labd artefacts list JOB` and `labd artefacts gc [--dry-run]`: a job's files, and the
retention limits applied now by the daemon that keeps them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from labd.cli.text import shown


def add_commands(nouns: Any, name_type: Any, handler: Any) -> None:
    """The `artefacts` noun (`handler("module:function")` makes a lazy handler)."""
    artefacts = nouns.add_parser(
        "artefacts", help="a job's files (videos, heat maps) and retention"
    )
    verbs = artefacts.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="a job's artefacts and where the API serves them")
    listing.add_argument("id", type=name_type, help="job id")
    listing.set_defaults(handler=handler("labd.cli.artefacts_cmd:list_artefacts"))
    gc = verbs.add_parser(
        "gc", help="remove what [artefacts] limits call for now; print what goes and frees"
    )
    gc.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    gc.set_defaults(handler=handler("labd.cli.artefacts_cmd:gc"))
    for cmd in verbs.choices.values():
        cmd.add_argument("--json", action="store_true", help="print JSON")


def list_artefacts(args: argparse.Namespace) -> int:
    from labd.cli.client import Client

    view = Client.from_args(args).artefacts(args.id)  # every page
    if args.json:
        print(json.dumps(view, indent=2))
        return 0
    unservable = view.get("unservable") or 0
    note = (
        f"{unservable:,} more files or folders are not listed: hidden, over 8 folders deep or"
        " named with characters an artefact may not have (docs/artefacts.md)"
    )
    if not view["artefacts"]:
        print(shown(view.get("elsewhere") or f"job {args.id} has no artefacts"))
        if unservable:
            print(note)
        return 0
    width = max(len(shown(a["name"])) for a in view["artefacts"])
    where = "URL" if "url" in view["artefacts"][0] else "PATH"
    print(f"{'NAME':<{width}}  {'KIND':<8} {'SIZE':>10}  {where}")
    for a in view["artefacts"]:
        link = a.get("url", a["path"])
        print(
            f"{shown(a['name']):<{width}}  {shown(a['kind']):<8} {_size(a['size']):>10}  "
            f"{shown(link)}"
        )
    if unservable:
        print(note)
    return 0


def gc(args: argparse.Namespace) -> int:
    from labd.cli.client import Client

    report = Client.from_args(args).call("POST", "/artefacts/gc", {"dry_run": args.dry_run})
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    verb = "would remove" if report["dry_run"] else "removed"
    if report["removed"]:
        print(f"{'JOB':<24} {'SUITE':<16} {'AGE':>8} {'SIZE':>10}  WHY")
    for r in report["removed"]:
        print(
            f"{shown(r['job_id']):<24} {shown(r['suite']):<16} {r['age_days']:>7.1f}d "
            f"{_size(r['bytes']):>10}  {shown(r['reason'])}"
        )
    for failure in report["failed"]:
        print(f"could not remove: {shown(failure)}")
    print(
        f"{verb} {len(report['removed'])} jobs' artefacts, "
        f"{'would free' if report['dry_run'] else 'freed'} {_size(report['freed_bytes'])}; "
        f"{_size(report['kept_bytes'])} kept"
    )
    return 0


def _size(n: float) -> str:
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            break
    return f"{n:.1f} {unit}"

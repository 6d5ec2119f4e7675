"""`labd replay record|serve|ca`."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from labd.errors import UsageError


def _authority(directory: str | None):  # type: ignore[no-untyped-def]
    from labd.replay import Authority

    return Authority.load(Path(directory)) if directory else None


def record(args: argparse.Namespace) -> int:
    from labd.replay import record

    out = Path(args.out)
    if not out.parent.is_dir():
        raise UsageError(f"{out}: no such directory {out.parent}")
    upstream_ca = Path(args.upstream_ca) if args.upstream_ca else None
    asyncio.run(record(out, args.host, args.port, _authority(args.ca), upstream_ca))
    return 0


def serve(args: argparse.Namespace) -> int:
    from labd.replay import Profile, Shaper, load, profile, serve

    custom = any(v is not None for v in (args.latency_ms, args.down_kbps, args.up_kbps))
    if args.profile and custom:
        raise UsageError("give --profile or --latency-ms/--down-kbps/--up-kbps, not both")
    if args.profile or not custom:
        chosen = profile(args.profile or "none")
    else:
        chosen = Profile(
            latency_ms=args.latency_ms or 0,
            down_kbps=args.down_kbps or 0,
            up_kbps=args.up_kbps or 0,
        )
    if args.jitter_ms or args.loss:
        chosen = chosen.model_copy(update={"jitter_ms": args.jitter_ms, "loss": args.loss})
    archive = load(Path(args.archive), int(args.max_archive_mb * 2**20), args.ignore_param or ())
    for problem in archive.skipped:
        print(f"labd replay: skipped {problem}", file=sys.stderr)
    summary = asyncio.run(
        serve(archive, Shaper(chosen, args.seed), args.host, args.port, _authority(args.ca))
    )
    for miss in summary["misses"]:
        print(f"labd replay: miss x{miss['count']}: {miss['url']}", file=sys.stderr)
    return 0


def ca(args: argparse.Namespace) -> int:
    from labd.replay import write_ca

    path = write_ca(Path(args.out_dir))
    print(f"wrote {path} (install it on test devices) and its key beside it")
    return 0

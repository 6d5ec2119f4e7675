"""`labd replay record|serve|ca`."""

from __future__ import annotations

import argparse
import asyncio
import math
import ssl
import sys
from pathlib import Path

from labd.cli.text import shown
from labd.errors import UsageError
from labd.logs import configure_logging


def _authority(directory: str | None):  # type: ignore[no-untyped-def]
    from labd.replay import Authority

    return Authority.load(Path(directory)) if directory else None


# The shaping options and the manifest's [network] keys they stand for: both are checked by
# the one model, NetworkSpec, so the command line refuses what a manifest refuses.
SKIPPED_SAID = 100  # archive entries named on stderr as skipped; the others are counted

SHAPING_OPTIONS = {
    "latency_ms": "--latency-ms",
    "down_kbps": "--down-kbps",
    "up_kbps": "--up-kbps",
    "jitter_ms": "--jitter-ms",
    "loss": "--loss",
}


def _check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port: must be from 0 to 65535 (0 picks a free port), got {port}")


def _mebibytes(option: str, value: float) -> int:
    """A size limit given in MiB, as bytes: finite and positive."""
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{option}: must be a finite number above 0, got {value}")
    return int(value * 2**20)


def _network(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The shaping options checked as a manifest's [network] table is: one line per problem,
    naming the option."""
    from pydantic import ValidationError

    from labd.model import NetworkSpec

    values = {name: getattr(args, name) for name in SHAPING_OPTIONS}
    infinite = [name for name, v in values.items() if v is not None and not math.isfinite(v)]
    if infinite:
        raise UsageError(
            "\n".join(
                f"{SHAPING_OPTIONS[name]}: must be a finite number, got {values[name]}"
                for name in infinite
            )
        )
    try:
        return NetworkSpec(archive="(command line)", **values)  # the path: load() checks it
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = str(err["loc"][0]) if err["loc"] else ""
            option = SHAPING_OPTIONS.get(loc, loc)
            reason = err["msg"][:1].lower() + err["msg"][1:]
            problems.append(f"{option}: {reason}, got {values.get(loc, err.get('input'))}")
        raise UsageError("\n".join(problems)) from None


def _log_to_stderr(args: argparse.Namespace) -> None:
    """The server's log lines to stderr (stdout is the machine-readable summary), a client's
    malformed request one line a minute rather than a traceback each."""
    configure_logging(args.log_level or "info", args.log_format or "auto")


def _writable(out: Path, overwrite: bool) -> None:
    """Refuse, before anything is recorded, an archive path that is not a file (/dev/null, a
    pipe, a directory): found only at the end, it lost the whole recording, or replaced a
    device with a regular file. An archive already there is kept unless `overwrite`: a
    recording stopped at once replaced 3 MB with an empty one. (Whether it can be written at
    all, and by this recorder alone, is `claim`'s to say.)"""
    from labd.replay import already_there, not_a_file

    if problem := not_a_file(out):
        raise UsageError(problem)
    if not overwrite and (problem := already_there(out)):
        raise UsageError(problem)


def record(args: argparse.Namespace) -> int:
    from labd.replay import claim, record, release

    _check_port(args.port)
    _log_to_stderr(args)
    out = Path(args.out)
    if not out.parent.is_dir():
        raise UsageError(f"{out}: no such directory {out.parent}")
    _writable(out, args.overwrite)
    upstream_ca = Path(args.upstream_ca) if args.upstream_ca else None
    if upstream_ca is not None:
        try:
            ssl.create_default_context(cafile=str(upstream_ca))
        except (OSError, ssl.SSLError) as e:
            reason = getattr(e, "strerror", None) or getattr(e, "reason", None) or str(e)
            raise UsageError(f"--upstream-ca {upstream_ca}: {reason}") from None
    max_body = _mebibytes("--max-body-mb", args.max_body_mb)
    hold = claim(out)
    try:
        asyncio.run(
            record(
                out,
                args.host,
                args.port,
                _authority(args.ca),
                upstream_ca,
                max_body,
                args.overwrite,
            )
        )
    finally:
        release(hold, out)
    return 0


def serve(args: argparse.Namespace) -> int:
    from labd.replay import Shaper, load, profile, profile_for, serve

    _check_port(args.port)
    _log_to_stderr(args)
    max_bytes = _mebibytes("--max-archive-mb", args.max_archive_mb)
    network = _network(args)
    # As a manifest's [network]: a profile (none by default), each option given overriding it.
    named = "none" if args.profile is None else args.profile
    try:
        profile(named)
    except UsageError as e:
        raise UsageError(f"--profile: {e}") from None
    chosen = profile_for(network.model_copy(update={"profile": named}))
    archive = load(Path(args.archive), max_bytes, args.ignore_param or ())
    listed = archive.skipped[:SKIPPED_SAID]
    for problem in listed:
        print(f"labd replay: skipped {shown(problem)}", file=sys.stderr)
    if unlisted := len(archive.skipped) - len(listed):
        print(f"labd replay: {unlisted} more entries skipped, not listed", file=sys.stderr)
    summary = asyncio.run(
        serve(archive, Shaper(chosen, args.seed), args.host, args.port, _authority(args.ca))
    )
    for miss in summary["misses"]:
        print(f"labd replay: miss x{miss['count']}: {shown(miss['url'])}", file=sys.stderr)
    if more := summary["misses_not_listed"]:
        print(f"labd replay: {more} more misses, of URLs not listed", file=sys.stderr)
    return 0


def ca(args: argparse.Namespace) -> int:
    from labd.replay import write_ca

    path = write_ca(Path(args.out_dir))
    print(f"wrote {path} (install it on test devices) and its key beside it")
    return 0

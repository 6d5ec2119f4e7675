"""The `labd` command. Nouns first; each command's module is imported only when it runs,
so `labd --help` and `labd version` start fast (SciPy and OpenCV take seconds)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from labd import __version__

EPILOG = """\
exit codes: 0 ok, 1 a negative verdict (e.g. a regression found),
            2 usage or configuration error, 3 runtime failure
"""

Handler = Callable[[argparse.Namespace], int]


def _name(value: str) -> str:
    """An id given on the command line, checked against labd's one grammar for names."""
    from labd.model import id_problem

    if problem := id_problem(value):
        raise argparse.ArgumentTypeError(problem)
    return value


def _lazy(target: str) -> Handler:
    """A handler that imports "module:function" only when called."""

    def run(args: argparse.Namespace) -> int:
        module, _, function = target.partition(":")
        handler: Handler = getattr(importlib.import_module(module), function)
        return handler(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labd",
        description="Lab orchestrator for performance testing on real devices.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", metavar="FILE", help="configuration file (TOML)")
    parser.add_argument(
        "--api-url",
        metavar="URL",
        help="a daemon's API elsewhere: http(s)://HOST:PORT (with the token of the credentials "
        "file) or unix:/PATH; default $LABD_API_URL, else this machine's daemon",
    )
    parser.add_argument(
        "--log-format", choices=["auto", "json", "console"], help="override log.format"
    )
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], help="override log.level"
    )
    nouns = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    run = nouns.add_parser("run", help="run the daemon in the foreground")
    run.set_defaults(handler=_lazy("labd.cli.daemon_cmd:run"))

    status = nouns.add_parser("status", help="ask a running daemon whether it is healthy")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=_lazy("labd.cli.daemon_cmd:status"))

    _add_job_commands(nouns)
    _add_device_commands(nouns)

    _add_stats_commands(nouns)
    _add_capture_commands(nouns)
    _add_replay_commands(nouns)
    _add_marker_commands(nouns)

    _add_auth_commands(nouns)
    from labd.cli.artefacts_cmd import add_commands  # small: no heavy imports

    add_commands(nouns, _name, _lazy)

    config = nouns.add_parser("config", help="inspect the configuration")
    config_verbs = config.add_subparsers(dest="verb", metavar="VERB", required=True)
    check = config_verbs.add_parser(
        "check", help="validate a file and print the effective configuration (secrets masked)"
    )
    check.add_argument("file", nargs="?", help="file to check (default: the one labd would use)")
    check.add_argument("--json", action="store_true", help="print JSON")
    check.set_defaults(handler=_lazy("labd.cli.config_cmd:check"))
    example = config_verbs.add_parser("example", help="print the commented example configuration")
    example.set_defaults(handler=_lazy("labd.cli.config_cmd:example"))

    schemas = nouns.add_parser("schemas", help="the MQTT messages' JSON Schemas and AsyncAPI")
    schema_verbs = schemas.add_subparsers(dest="verb", metavar="VERB", required=True)
    export = schema_verbs.add_parser("export", help="write them (from the models) to a directory")
    export.add_argument("--out", default="schemas", help="directory (default: schemas)")
    export.set_defaults(handler=_lazy("labd.cli.schemas_cmd:export"))

    version = nouns.add_parser("version", help="print labd's version")
    version.add_argument("--json", action="store_true", help="print JSON")
    version.set_defaults(handler=_version)
    return parser


def _add_job_commands(nouns: Any) -> None:
    submit = nouns.add_parser("submit", help="submit a test manifest to the running daemon")
    submit.add_argument("file", help="test manifest (TOML)")
    submit.add_argument("--wait", action="store_true", help="follow the job, print its results")
    submit.add_argument(
        "--id", type=_name, help="job id (submitting the same id again is harmless)"
    )
    submit.add_argument(
        "--connect-wait",
        type=float,
        default=15.0,
        metavar="S",
        help="seconds to wait for a daemon that is still starting (default 15)",
    )
    submit.add_argument(
        "--via",
        choices=["auto", "mqtt", "api"],
        default="auto",
        help="MQTT (as CI does; the default when MQTT is enabled) or the local HTTP API",
    )
    submit.add_argument("--json", action="store_true", help="print JSON")
    submit.set_defaults(handler=_lazy("labd.cli.jobs_cmd:submit"))

    jobs = nouns.add_parser("jobs", help="list, inspect and cancel jobs")
    verbs = jobs.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="recent jobs, newest first")
    listing.add_argument("--state", action="append", default=[], help="only this state")
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(handler=_lazy("labd.cli.jobs_cmd:list_jobs"))
    listing.add_argument(
        "--via",
        choices=["api", "mqtt"],
        default="api",
        help="the local HTTP API (default) or MQTT, as CI sees it",
    )
    for verb, helptext, target in (
        ("show", "a job's state, progress and why it waits", "show"),
        ("cancel", "cancel a job in any state", "cancel"),
        ("results", "a job's raw values and summary", "results"),
    ):
        cmd = verbs.add_parser(verb, help=helptext)
        cmd.add_argument("id", type=_name, help="job id")
        cmd.set_defaults(handler=_lazy(f"labd.cli.jobs_cmd:{target}"))
        if verb == "results":
            cmd.add_argument(
                "--format", choices=["table", "csv", "json", "perfherder"], default="table"
            )
        if verb in ("show", "cancel", "results"):
            cmd.add_argument(
                "--via",
                choices=["api", "mqtt"],
                default="api",
                help="the local HTTP API (default) or MQTT, as CI sees it",
            )
    for cmd in verbs.choices.values():
        cmd.add_argument("--json", action="store_true", help="print JSON")


def _add_auth_commands(nouns: Any) -> None:
    auth = nouns.add_parser("auth", help="principals: credentials, key rotation, broker files")
    verbs = auth.add_subparsers(dest="verb", metavar="VERB", required=True)
    add = verbs.add_parser(
        "add", help="make credentials for a new principal; print its configuration"
    )
    add.add_argument("name", help="principal name (a CI system, a person, a dashboard)")
    add.add_argument("--role", choices=["viewer", "submitter", "admin"], required=True)
    add.add_argument("--key-id", default="k1", help="name of its first key (default k1)")
    add.add_argument("--out", help="credentials file to write (default NAME.credentials.toml)")
    add.add_argument("--force", action="store_true", help="replace an existing file")
    add.set_defaults(handler=_lazy("labd.cli.auth_cmd:add"))
    rotate = verbs.add_parser("rotate", help="a new key, token and password for a principal")
    rotate.add_argument("name")
    rotate.add_argument("--key-id", required=True, help="name of the new key, e.g. 2026-12")
    rotate.add_argument("--out", help="credentials file to write (default NAME.credentials.toml)")
    rotate.add_argument("--force", action="store_true", help="replace an existing file")
    rotate.set_defaults(handler=_lazy("labd.cli.auth_cmd:rotate"))
    mosquitto = verbs.add_parser(
        "mosquitto", help="write Mosquitto's password and ACL files from the principals"
    )
    mosquitto.add_argument("--out", required=True, metavar="DIR", help="where to write them")
    mosquitto.add_argument("--daemon-user", help="labd's broker account (default mqtt.username)")
    mosquitto.set_defaults(handler=_lazy("labd.cli.auth_cmd:mosquitto"))
    whoami = verbs.add_parser("whoami", help="which credentials this command uses")
    whoami.add_argument("--json", action="store_true", help="print JSON")
    whoami.set_defaults(handler=_lazy("labd.cli.auth_cmd:whoami"))


def _add_device_commands(nouns: Any) -> None:
    devices = nouns.add_parser("devices", help="list and administer devices")
    verbs = devices.add_subparsers(dest="verb", metavar="VERB", required=True)
    listing = verbs.add_parser("list", help="every device of the lab")
    listing.set_defaults(handler=_lazy("labd.cli.devices_cmd:list_devices"))
    show = verbs.add_parser("show", help="one device")
    show.add_argument("id", type=_name)
    show.set_defaults(handler=_lazy("labd.cli.devices_cmd:show"))
    for action, helptext in (
        ("drain", "finish the current job, then take no more"),
        ("enable", "take jobs again (also lifts a quarantine)"),
        ("maintenance", "take the device out of service"),
    ):
        cmd = verbs.add_parser(action, help=helptext)
        cmd.add_argument("id", type=_name)
        cmd.set_defaults(handler=_lazy("labd.cli.devices_cmd:admin"), action=action)
    for cmd in verbs.choices.values():
        cmd.add_argument("--json", action="store_true", help="print JSON")


def _add_stats_commands(nouns: Any) -> None:
    compare = nouns.add_parser(
        "compare",
        help="A/B: does NEW differ from BASE? (exit 1 on a regression)",
        description="Compare two samples per metric: files (CSV, labd result JSON) or job ids.",
    )
    compare.add_argument("base", help="baseline: a file or a job id")
    compare.add_argument("new", help="candidate: a file or a job id")
    compare.add_argument(
        "--effect",
        type=float,
        default=0.01,
        help="smallest relative change that matters (default 0.01 = 1%%)",
    )
    compare.add_argument("--alpha", type=float, default=0.05, help="significance (default 0.05)")
    compare.add_argument(
        "--method", choices=["auto", "welch", "hodges-lehmann", "bootstrap"], default="auto"
    )
    compare.add_argument("--no-fdr", action="store_true", help="no multiple-comparison control")
    compare.add_argument(
        "--higher-is-better", action="store_true", help="for metrics without metadata"
    )
    compare.add_argument("--metric", action="append", help="only this metric (repeatable)")
    compare.add_argument("--json", action="store_true", help="print JSON")
    compare.set_defaults(handler=_lazy("labd.cli.stats_cmd:compare"))

    detect = nouns.add_parser(
        "detect",
        help="find changes in histories (exit 1 when any is found)",
        description="Regression detection over histories: a CSV with series,build,value.",
    )
    detect.add_argument(
        "file", nargs="?", help="CSV with the header series,build,value, builds in order"
    )
    detect.add_argument("--suite", help="with --test: the history stored by the daemon")
    detect.add_argument("--test", help="with --suite: the history stored by the daemon")
    detect.add_argument(
        "--method",
        # labd.stats.METHODS, spelled out: importing scipy would slow every command
        choices=["ets+rank", "ets+cusum", "ets+cusum+rank", "ets", "cusum", "rank", "talos"],
        default="ets+rank",
    )
    detect.add_argument("--json", action="store_true", help="print JSON")
    detect.set_defaults(handler=_lazy("labd.cli.stats_cmd:detect"))

    report = nouns.add_parser(
        "report", help="an HTML report of a job, or of two compared, with its history"
    )
    report.add_argument("job", type=_name, help="the job (the baseline when a second is given)")
    report.add_argument("job2", nargs="?", type=_name, help="a job to compare with the first")
    report.add_argument(
        "-o", "--output", help="file to write (default report-JOB.html, or report-JOB-JOB2.html)"
    )
    report.add_argument("--force", action="store_true", help="replace an existing file")
    report.add_argument("--effect", type=float, default=0.01, help="effect of interest")
    report.set_defaults(handler=_lazy("labd.cli.report_cmd:report"))

    calibrate = nouns.add_parser(
        "calibrate",
        help="iterations needed per component, by simulation from a pilot",
        description="Power by resampling a pilot: the smallest n that detects the effect.",
    )
    calibrate.add_argument("file", help="pilot samples: CSV (metric,value) or labd result JSON")
    calibrate.add_argument("--effect", type=float, default=0.01, help="default 0.01 (1%%)")
    calibrate.add_argument(
        "--detection", type=float, default=0.95, help="target detection rate (default 0.95)"
    )
    calibrate.add_argument("--draws", type=int, default=200, help="simulations per size")
    calibrate.add_argument("--json", action="store_true", help="print JSON")
    calibrate.set_defaults(handler=_lazy("labd.cli.stats_cmd:calibrate"))


def _add_capture_commands(nouns: Any) -> None:
    analyze = nouns.add_parser(
        "analyze",
        help="visual metrics of a recording between a green and a red screen",
        description="Speed Index, visual completeness, unique-frame rate and more, from pixels.",
    )
    analyze.add_argument("video", help="a recording: any video file OpenCV reads")
    analyze.add_argument("--json", action="store_true", help="print JSON")
    analyze.add_argument(
        "--start-color", default="green", help="name or #RRGGBB (orange: browsertime's)"
    )
    analyze.add_argument("--end-color", default="red", help="name or #RRGGBB")
    analyze.add_argument(
        "--tolerance", type=int, default=100, help="sync colour tolerance, sum over RGB"
    )
    analyze.add_argument("--progress", choices=["histogram", "pixel"], default="histogram")
    analyze.add_argument("--heatmap", metavar="OUT.png", help="write the heat map of changes")
    analyze.add_argument(
        "--video-out", metavar="OUT.webm", help="write the analysed span (VP8 WebM)"
    )
    analyze.add_argument("--progress-out", metavar="OUT.json", help="write the per-frame progress")
    analyze.add_argument("--timestamps", metavar="FILE", help="per-frame times in ms, one per line")
    analyze.add_argument("--checkerboard", metavar="C1,C2,SIZE", help="measure checkerboarding")
    analyze.add_argument("--tearing-colors", metavar="C1,C2,...", help="detect tearing")
    analyze.add_argument(
        "--show-progress",
        choices=["auto", "always", "never"],
        default="auto",
        help="progress on stderr (auto: when stderr is a terminal)",
    )
    analyze.set_defaults(handler=_lazy("labd.cli.capture_cmd:analyze"))

    capture = nouns.add_parser(
        "capture",
        help="record frames from a live source into a spool file",
        description="Record from an X11 display, a V4L2 device or an Android screen.",
    )
    source = capture.add_mutually_exclusive_group(required=True)
    source.add_argument("--x11", metavar="DISPLAY[+X,Y,WxH]", help="grab an X11 display or region")
    source.add_argument(
        "--v4l2", metavar="DEVICE", help="a capture card or camera, e.g. /dev/video0"
    )
    source.add_argument("--adb", metavar="SERIAL", help="an Android screen (screenrecord)")
    capture.add_argument("-o", "--output", required=True, help="spool video (.avi)")
    capture.add_argument("--seconds", type=float, default=10.0, help="how long (default 10)")
    capture.add_argument("--fps", type=float, default=60.0, help="frames per second asked for")
    capture.set_defaults(handler=_lazy("labd.cli.capture_cmd:capture"))


def _add_replay_commands(nouns: Any) -> None:
    replay = nouns.add_parser("replay", help="record and replay web pages, with network shaping")
    verbs = replay.add_subparsers(dest="verb", required=True, metavar="VERB")
    record = verbs.add_parser("record", help="a recording forward proxy that writes a HAR 1.2")
    record.add_argument("out", metavar="OUT.har")
    record.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    record.add_argument("--host", default="127.0.0.1", help="address to listen on")
    record.add_argument("--ca", metavar="DIR", help="the replay CA (labd replay ca) for HTTPS")
    record.add_argument("--upstream-ca", metavar="PEM", help="trust this CA for origins too")
    record.set_defaults(handler=_lazy("labd.cli.replay_cmd:record"))

    serve = verbs.add_parser("serve", help="serve an archive from memory, shaped")
    serve.add_argument("archive", help="a HAR file (recorded, or exported by a browser)")
    serve.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument(
        "--profile", help="none, 2g, 3g-slow, 3g, 3g-fast, 4g, lte, dsl, cable, fios"
    )
    serve.add_argument("--latency-ms", type=float, help="round-trip time added")
    serve.add_argument("--down-kbps", type=float, help="downstream bandwidth")
    serve.add_argument("--up-kbps", type=float, help="upstream bandwidth")
    serve.add_argument("--jitter-ms", type=float, default=0.0, help="extra delay up to this")
    serve.add_argument(
        "--loss", type=float, default=0.0, help="share of exchanges with a lost packet"
    )
    serve.add_argument("--seed", type=int, default=0, help="for jitter and loss")
    serve.add_argument(
        "--ignore-param",
        action="append",
        metavar="NAME",
        help="query parameter not matched (repeatable)",
    )
    serve.add_argument("--ca", metavar="DIR", help="the replay CA (labd replay ca) for HTTPS")
    serve.add_argument("--max-archive-mb", type=float, default=256, help="refuse larger archives")
    serve.set_defaults(handler=_lazy("labd.cli.replay_cmd:serve"))

    ca = verbs.add_parser("ca", help="write a new CA certificate for HTTPS replay")
    ca.add_argument("out_dir", metavar="OUT_DIR")
    ca.set_defaults(handler=_lazy("labd.cli.replay_cmd:ca"))


def _add_marker_commands(nouns: Any) -> None:
    markers = nouns.add_parser(
        "markers",
        help="cold-launch iterations from logcat performance marks (Raptor's format)",
        description="Parse Raptor's PerformanceTiming lines and Android's launch lines.",
    )
    source = markers.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", metavar="LOG", help="a saved logcat (brief or threadtime)")
    source.add_argument("--serial", metavar="S", help="tail this device's logcat")
    markers.add_argument("--app", help="only this app (origin or package)")
    markers.add_argument("--json", action="store_true", help="one JSON object per iteration")
    markers.set_defaults(handler=_lazy("labd.cli.markers_cmd:markers"))


def _version(args: argparse.Namespace) -> int:
    if args.json:
        import json

        print(json.dumps({"version": __version__, "python": sys.version.split()[0]}))
    else:
        print(f"labd {__version__}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = build_parser().parse_args(argv)
    from labd.errors import LabdError  # small module, but keep --help free of imports

    try:
        code: int = args.handler(args)
        return code
    except LabdError as e:
        print(str(e) if e.exit_code == 2 else f"labd: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug: one line, the traceback where it can be read, exit 3
        return _unexpected(e)


def _unexpected(error: Exception) -> int:
    """Keep the traceback of an unexpected error in a file and say where, in one line; the
    exit code is 3 (a runtime failure), never 1, which means a negative verdict."""
    import os
    import tempfile
    import traceback
    from pathlib import Path

    from labd.errors import EXIT_RUNTIME

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    where = Path(base) / "labd"
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="crash-", suffix=".log", dir=where)
        with os.fdopen(fd, "w") as out:
            traceback.print_exception(error, file=out)
        detail = f"details in {name}"
    except OSError:
        detail = "no place to write the details"
    from labd.redact import mask_token_like

    # The message may quote a configuration value (a key, a token): never print one.
    summary = mask_token_like(f"{type(error).__name__}: {error}".splitlines()[0])[:300]
    print(f"labd: unexpected error: {summary} ({detail})", file=sys.stderr)
    return EXIT_RUNTIME


if __name__ == "__main__":
    raise SystemExit(main())

"""The `labd` command. Nouns first; each command's module is imported only when it runs,
so `labd --help` and `labd version` start fast (SciPy and OpenCV take seconds)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from labd import SCHEMA, __version__

# Short names: every parser below uses them.
from labd.cli.handlers import lazy as _lazy
from labd.cli.handlers import name_arg as _name
from labd.cli.tools import (
    add_capture_commands,
    add_marker_commands,
    add_replay_commands,
    add_stats_commands,
)

EPILOG = """\
exit codes: 0 ok, 1 a negative verdict (e.g. a regression found),
            2 usage or configuration error, 3 runtime failure
"""


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

    add_stats_commands(nouns)
    add_capture_commands(nouns)
    add_replay_commands(nouns)
    add_marker_commands(nouns)

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
    listing.add_argument(
        "--limit", type=int, default=50, help="at most this many, the newest (default 50)"
    )
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


def _each_knows_itself(parser: argparse.ArgumentParser) -> None:
    """Every parser sets itself as `parser_`: the deepest one parsed wins."""
    parser.set_defaults(parser_=parser)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _each_knows_itself(sub)


def _given_to(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str], unknown: list[str]
) -> argparse.ArgumentParser:
    """The parser `unknown` was given to: labd's own when it came before the command
    (`labd --bogus status` is no fault of status's)."""
    command = getattr(args, "command", None)
    if command in argv and unknown[0] in argv and argv.index(unknown[0]) < argv.index(command):
        return parser
    parsed: argparse.ArgumentParser = args.parser_
    return parsed


def _version(args: argparse.Namespace) -> int:
    if args.json:
        import json

        python = sys.version.split()[0]
        print(json.dumps({"version": __version__, "schema": SCHEMA, "python": python}))
    else:
        print(f"labd {__version__} (database schema {SCHEMA})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    _each_knows_itself(parser)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the usage of the command it was given to, not labd's whole one
        owner = _given_to(parser, args, sys.argv[1:] if argv is None else list(argv), unknown)
        owner.error(f"unrecognized arguments: {' '.join(unknown)}")
    from labd.errors import LabdError  # small module, but keep --help free of imports

    if args.command != "version":  # kept free of imports, as --help
        _logs_to_stderr()

    try:
        code: int = args.handler(args)
        return code
    except LabdError as e:
        from labd.cli.text import shown  # a message may quote a file, a job or the user

        message = shown(str(e), lines=True)
        print(message if e.exit_code == 2 else f"labd: {message}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug: one line, the traceback where it can be read, exit 3
        return _unexpected(e)


def _logs_to_stderr() -> None:
    """What a command logs (a plugin refused while its configuration is checked, say) goes to
    stderr, not into the output a script reads (`labd config check --json` was no longer
    JSON); `labd run` sets its own format later. sys.stderr is looked up at each line."""
    import structlog

    if not structlog.is_configured():
        structlog.configure(logger_factory=lambda *_: structlog.PrintLogger(sys.stderr))


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
    from labd.cli.text import shown
    from labd.redact import mask_token_like

    # The message may quote a configuration value (a key, a token): never print one.
    summary = shown(mask_token_like(f"{type(error).__name__}: {error}".splitlines()[0])[:300])
    print(f"labd: unexpected error: {summary} ({detail})", file=sys.stderr)
    return EXIT_RUNTIME


if __name__ == "__main__":
    raise SystemExit(main())

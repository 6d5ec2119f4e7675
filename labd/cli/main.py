"""The `labd` command. Nouns first; each command's module is imported only when it runs,
so `labd --help` and `labd version` start fast (statsmodels and OpenCV take seconds)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from labd import __version__

EPILOG = """\
exit codes: 0 ok, 1 a negative verdict (e.g. a regression found),
            2 usage or configuration error, 3 runtime failure
"""

Handler = Callable[[argparse.Namespace], int]


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

    version = nouns.add_parser("version", help="print labd's version")
    version.add_argument("--json", action="store_true", help="print JSON")
    version.set_defaults(handler=_version)
    return parser


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


if __name__ == "__main__":
    raise SystemExit(main())

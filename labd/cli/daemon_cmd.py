"""`labd run` and `labd status`."""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

from labd.config import LoadedConfig, load_config, secret_values
from labd.errors import EXIT_RUNTIME, LabdError
from labd.logs import configure_logging


def load_and_log(args: argparse.Namespace) -> LoadedConfig:
    """The configuration, with logging set up from it and the command-line overrides."""
    loaded = load_config(args.config)
    log = loaded.settings.log
    configure_logging(
        args.log_level or log.level,
        args.log_format or log.format,
        secrets=secret_values(loaded.settings),
    )
    return loaded


def run(args: argparse.Namespace) -> int:
    """Run the daemon in the foreground until SIGTERM or SIGINT. Once logging is set up, a
    reason to stop is a log line like any other (JSON for jq, a priority for journald), not
    bare text in the middle of the log."""
    loaded = load_and_log(args)
    import structlog

    from labd.daemon import Daemon

    log = structlog.get_logger("labd")
    try:
        return asyncio.run(Daemon(loaded).run())
    except LabdError as e:
        log.error("labd cannot run", error=str(e), exit_code=e.exit_code)
        return e.exit_code
    except Exception:  # a bug: the traceback in the log (no local variables, secrets masked)
        log.critical("labd stopped on an unexpected error", exc_info=True, exit_code=EXIT_RUNTIME)
        return EXIT_RUNTIME


def _labds(body: bytes) -> dict[str, Any] | None:
    """A health answer as labd gives it (a JSON object with a status), else None."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) and "status" in answer else None


def status(args: argparse.Namespace) -> int:
    """Ask the local daemon's side port for /healthz and /readyz; and say when no labd runs
    on this configuration's state directory: the answer is then another daemon's (another
    account's, on the same port)."""
    from labd.daemon import daemon_on, state_dir_id

    settings = load_config(args.config).settings
    http = settings.http
    base = f"http://{http.host}:{http.port}"
    state_dir = settings.daemon.state_path
    result: dict[str, object] = {"url": base, "state_dir": str(state_dir)}
    code = 0
    answered = False  # some daemon did
    for path in ("healthz", "readyz"):
        try:
            with urllib.request.urlopen(f"{base}/{path}", timeout=5) as response:
                result[path] = _labds(response.read())
            answered = True
        except urllib.error.HTTPError as e:
            result[path] = _labds(e.read())
            code, answered = EXIT_RUNTIME, True
        except OSError as e:
            result[path] = {"status": f"unreachable: {getattr(e, 'reason', e)}"}
            code = EXIT_RUNTIME
        if result[path] is None:  # another program listens on labd's port
            result[path] = {
                "status": f"not labd: the program at {base} answered /{path} with no labd "
                "status (another program on [http] port?)"
            }
            code = EXIT_RUNTIME
    said = result["healthz"].get("state_dir_id") if isinstance(result["healthz"], dict) else None
    # The daemon answering says which state directory it runs on; an older one does not, and
    # then whether any labd runs on this one is what can be told.
    ours = said == state_dir_id(state_dir) if said else daemon_on(state_dir)
    result["daemon_on_state_dir"] = ours
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for path in ("healthz", "readyz"):
            entry = result[path]
            assert isinstance(entry, dict)
            print(f"{path}: {entry.get('status')}")
            for check, state in entry.get("checks", {}).items():
                print(f"  {check}: {state}")
        if answered and ours is False:
            print(
                f"note: the daemon answering at {base} does not run on this configuration's "
                f"state directory ({state_dir}): it is another one (another account's or "
                "configuration's)"
            )
    return code

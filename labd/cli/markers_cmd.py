"""`labd markers --file LOG | --serial S`: cold-launch iterations from logcat marks.

From a device the log is read as it arrives (whatever the socket holds, never a fixed block),
so each iteration prints the moment its fullyLoaded line comes; Ctrl-C prints the iteration
still open and the summary of what was found so far. The phone is reached as `labd.cli.adb`
says.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from labd.cli.adb import adb_device, adb_failure
from labd.cli.text import shown
from labd.errors import UsageError

LOGCAT = ("logcat", "-v", "threadtime")
POLL_S = 0.2  # how soon a Ctrl-C ends a quiet log


def markers(args: argparse.Namespace) -> int:
    from labd.markers import LaunchCollector

    collector = LaunchCollector(args.app)
    count = 0
    interrupted = False

    def stop(*_: object) -> None:
        nonlocal interrupted
        interrupted = True

    if args.file:
        lines: Iterable[str] = _file_lines(Path(args.file))
    else:
        # Ctrl-C ends the read between lines, never inside one: every line already received
        # is counted before the summary (a KeyboardInterrupt could land between the socket's
        # read and the parse, losing what had just arrived).
        signal.signal(signal.SIGINT, stop)
        lines = _device_lines(args.serial, lambda: interrupted)
    try:
        for line in lines:
            done = collector.feed(line)
            if done is not None:
                _show(done.as_dict(), args.json)
                count += 1
    except KeyboardInterrupt:  # Ctrl-C while reading a file: what was found so far is the answer
        interrupted = True
    while (last := collector.finish()) is not None:  # each app still launching at the end
        if interrupted and not last.complete:  # finish() said the log ended: it did not
            last.problems[-1] = "interrupted (Ctrl-C) before fullyLoaded"
        _show(last.as_dict(), args.json)
        count += 1
    print(
        f"labd markers: {count} iterations from {collector.lines} lines; "
        f"{collector.orphans} marks without a launch; {collector.unreadable} unreadable marks"
        " outside a launch (a garbled epoch or field)" + (" (interrupted)" if interrupted else ""),
        file=sys.stderr,
        flush=True,
    )
    return 0


def _show(iteration: dict[str, object], as_json: bool) -> None:
    if as_json:
        print(json.dumps(iteration), flush=True)
        return
    state = "complete" if iteration["complete"] else "INCOMPLETE"
    out = [f"iteration {iteration['iteration']} {iteration['app']} ({state})"]
    metrics = iteration["metrics"]
    assert isinstance(metrics, dict)
    out += [f"  {name:<36} {value:10.1f} ms" for name, value in metrics.items()]
    out += [f"  ! {problem}" for problem in iteration["problems"]]  # type: ignore[attr-defined]
    # A log's app names and problems are shown escaped; a pipe (tee, grep) sees it now, not at exit.
    print("\n".join(shown(line) for line in out), flush=True)


def _file_lines(path: Path) -> Iterator[str]:
    try:
        with path.open("rb") as f:
            for raw in f:
                yield raw.decode("utf-8", "replace")  # logs hold binary garbage too
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from e


def _device_lines(serial: str, stopped: Callable[[], bool]) -> Iterable[str]:
    """`logcat -v threadtime` of a device, line by line as it comes, until the device leaves or
    `stopped()` (checked at least every POLL_S)."""
    import adbutils

    try:
        stream = adb_device(serial).shell(shlex.join(LOGCAT), stream=True)
    except (adbutils.AdbError, OSError) as e:
        raise adb_failure(serial, e) from e
    pending = b""
    stream.conn.settimeout(POLL_S)
    try:
        while not stopped():
            try:
                chunk = stream.conn.recv(65536)  # what has arrived, at once
            except TimeoutError:
                continue
            except OSError:  # the device left: the log ends here
                break
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                yield raw.decode("utf-8", "replace")
        if pending:
            yield pending.decode("utf-8", "replace")
    finally:
        stream.close()

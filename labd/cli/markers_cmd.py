"""`labd markers --file LOG | --serial S`: cold-launch iterations from logcat marks."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from labd.errors import InfrastructureError, UsageError


def markers(args: argparse.Namespace) -> int:
    from labd.markers import LaunchCollector

    collector = LaunchCollector(args.app)
    lines = _file_lines(Path(args.file)) if args.file else _device_lines(args.serial)
    count = 0
    for line in lines:
        done = collector.feed(line)
        if done is not None:
            _show(done.as_dict(), args.json)
            count += 1
    last = collector.finish()
    if last is not None:
        _show(last.as_dict(), args.json)
        count += 1
    print(
        f"labd markers: {count} iterations from {collector.lines} lines; "
        f"{collector.orphans} marks without a launch",
        file=sys.stderr,
    )
    return 0


def _show(iteration: dict[str, object], as_json: bool) -> None:
    if as_json:
        print(json.dumps(iteration), flush=True)
        return
    state = "complete" if iteration["complete"] else "INCOMPLETE"
    print(f"iteration {iteration['iteration']} {iteration['app']} ({state})")
    metrics = iteration["metrics"]
    assert isinstance(metrics, dict)
    for name, value in metrics.items():
        print(f"  {name:<36} {value:10.1f} ms")
    for problem in iteration["problems"]:  # type: ignore[attr-defined]
        print(f"  ! {problem}")


def _file_lines(path: Path) -> Iterator[str]:
    try:
        with path.open("rb") as f:
            for raw in f:
                yield raw.decode("utf-8", "replace")  # logs hold binary garbage too
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from e


def _device_lines(serial: str) -> Iterable[str]:
    """`logcat -v threadtime` of a device, as it comes (until Ctrl-C or the device leaves)."""
    import adbutils

    try:
        device = adbutils.adb.device(serial=serial)
        stream = device.shell(["logcat", "-v", "threadtime"], stream=True)
    except adbutils.AdbError as e:
        raise InfrastructureError(f"device {serial}: {e}") from e
    pending = b""
    try:
        while chunk := stream.read(65536):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                yield raw.decode("utf-8", "replace")
    except KeyboardInterrupt:
        return
    finally:
        stream.close()

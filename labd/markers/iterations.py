"""From a stream of marks to cold-launch iterations with Raptor's metric names.

An iteration opens at `appLaunch` for an app (from the home screen, through `@`) and takes
that app's lifecycle marks as epoch differences from it: `coldlaunch.navigationLoaded` ...
`coldlaunch.fullyLoaded`; measures give their duration. It closes at `fullyLoaded` or when the
next launch opens. Native apps: each "Displayed" line opens one (`coldlaunch.displayed`), and
"Fully drawn" adds `coldlaunch.fullyDrawn`.

What logs really do is expected: lines of other processes interleave; a restarted `adb logcat`
dumps its buffer again (a mark seen twice counts once); a wrapped buffer loses lines (marks
with no launch before them are counted as orphans, an iteration that never reaches
fullyLoaded is reported incomplete); the wall clock can jump (a mark before its launch or more
than `max_span_ms` after it is left out and named).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from labd.markers.raptor import ENTRY, Launch, duration_problem, parse_launch, split_entry

LIFECYCLE = (
    "navigationLoaded",
    "navigationInteractive",
    "visuallyLoaded",
    "contentInteractive",
    "fullyLoaded",
)
PREFIX = "coldlaunch."
_AFTER_ENTRY = len(ENTRY)


@dataclass
class Iteration:
    index: int
    app: str
    launch_epoch: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    complete: bool = False
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "iteration": self.index,
            "app": self.app,
            "launch_epoch": self.launch_epoch,
            "metrics": self.metrics,
            "complete": self.complete,
            "problems": self.problems,
        }


class LaunchCollector:
    def __init__(self, app: str | None = None, max_span_ms: float = 600_000) -> None:
        self.app = app  # only this app's launches; None: any
        self.max_span_ms = max_span_ms
        self.current: Iteration | None = None
        self.count = 0
        self.orphans = 0  # marks with no launch before them
        self.unreadable = 0  # mark lines no iteration could name (a garbled launch mark)
        self.lines = 0
        self.seen: set[str] = set()  # this iteration's entries, as logged

    def feed(self, line: str) -> Iteration | None:
        """One log line; the iteration it completed, if any."""
        self.lines += 1
        at = line.find(ENTRY)
        if at < 0:
            launch = parse_launch(line)
            return None if launch is None else self._launch(launch)
        # A mark: the hot path, in one function on the entry's text (calls cost here)
        text = line[at + _AFTER_ENTRY :].rstrip()
        seen = self.seen
        if text in seen:  # logcat restarted and replayed its buffer
            return None
        seen.add(text)
        raw = split_entry(text)
        if raw is None:
            if (it := self.current) is not None and it.app in text:
                it.problems.append(f"an unreadable mark left out: {text[:120]!r}")
            else:
                self.unreadable += 1
            return None
        _, kind, name, context, _, duration, epoch = raw
        if name == "appLaunch":
            return self._open(context, epoch, text) if self._wanted(context) else None
        it = self.current
        if it is None or context != it.app or it.launch_epoch is None:
            if self._wanted(context):
                self.orphans += 1
            return None
        if kind == "measure":
            try:
                ms = float(duration)
            except ValueError:
                it.problems.append(f"{name}: duration {duration!r} is not a number; left out")
                return None
            if problem := duration_problem(ms):
                it.problems.append(f"{name}: duration {duration!r}: {problem}; left out")
                return None
            self._take(it, name, ms)
            return None
        elapsed = epoch - it.launch_epoch
        if not 0 <= elapsed <= self.max_span_ms:
            it.problems.append(f"{name}: {elapsed} ms from the launch (a clock jump?); left out")
            return None
        self._take(it, name, float(elapsed))
        if name == "fullyLoaded":
            it.complete = True
            self.current = None
            return it
        return None

    @staticmethod
    def _take(it: Iteration, name: str, ms: float) -> None:
        """A mark's value; one logged again in the same launch with another value keeps the
        first and is named (it was replaced in silence)."""
        key = PREFIX + name
        first = it.metrics.setdefault(key, ms)
        if first != ms:
            it.problems.append(
                f"{name}: logged again in this launch ({first:g} ms, then {ms:g} ms); the first "
                "kept"
            )

    def finish(self) -> Iteration | None:
        """The iteration still open at the end of the log (incomplete)."""
        done, self.current = self.current, None
        if done is not None and not done.complete:
            done.problems.append("the log ends before fullyLoaded")
        return done

    def _open(self, app: str, epoch: int | None, launch: str | None = None) -> Iteration | None:
        closed = self.finish()
        if closed is not None and closed.metrics == {} and closed.launch_epoch is None:
            closed = None
        self.current = Iteration(self.count, app, epoch)
        self.count += 1
        self.seen = set() if launch is None else {launch}
        return closed

    def _wanted(self, app: str) -> bool:
        return self.app is None or app == self.app

    def _launch(self, launch: Launch) -> Iteration | None:
        if not self._wanted(launch.package):
            return None
        if launch.kind == "displayed":
            closed = self._open(launch.package, None)
            assert self.current is not None
            self.current.metrics[PREFIX + "displayed"] = launch.ms
            self.current.complete = True  # Fully drawn is optional: apps must report it
            return closed
        it = self.current
        if it is None or it.app != launch.package:
            self.orphans += 1
            return None
        it.metrics[PREFIX + "fullyDrawn"] = launch.ms
        self.current = None
        return it

"""From a stream of marks to cold-launch iterations with Raptor's metric names.

An iteration opens at `appLaunch` for an app (from the home screen, through `@`) and takes
that app's lifecycle marks as epoch differences from it: `coldlaunch.navigationLoaded` ...
`coldlaunch.fullyLoaded`; measures give their duration. Marks go to their own app's launch
(`name@context`): apps may launch at once. An iteration closes at its fullyLoaded, when its
app launches again, or at the end of the log. Native apps: a "Displayed" line opens one
(`coldlaunch.displayed`), and "Fully drawn" adds `coldlaunch.fullyDrawn`; a "Displayed" line
while the same app's Raptor launch is open is one more figure of that launch.

What logs really do is expected: lines of other processes interleave; a restarted `adb logcat`
dumps its buffer again (a mark seen twice counts once, so a replayed launch is the launch
already counted, however many the buffer holds); a wrapped buffer loses lines (marks with no
launch before them are counted as orphans, an iteration that never reaches fullyLoaded is
reported incomplete); the wall clock can jump (a mark before its launch or more than
`max_span_ms` after it is left out and named).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from labd.markers.raptor import (
    ENTRY,
    Launch,
    duration_problem,
    entry_problem,
    parse_launch,
    split_entry,
)
from labd.model import METRIC_NAME_RULE, is_metric_name

LIFECYCLE = (
    "navigationLoaded",
    "navigationInteractive",
    "visuallyLoaded",
    "contentInteractive",
    "fullyLoaded",
)
PREFIX = "coldlaunch."
_AFTER_ENTRY = len(ENTRY)
# Marks remembered to tell a replay (the newest half kept when full, so at least 5,000): a
# replay repeats no more than the buffer holds, about 2,500 lines by default (256 KiB). A
# small table also keeps the hot path fast: 100,000 cost a fifth of the speed.
REMEMBERED = 10_000


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
        self.open: dict[str, Iteration] = {}  # by app, the last launched last
        self.count = 0
        self.orphans = 0  # marks with no launch before them
        self.unreadable = 0  # mark lines no iteration could name (a garbled launch mark)
        self.lines = 0
        # Entries as logged, across launches (a replayed buffer repeats launches already
        # closed), oldest first: a dict is a set that keeps its order.
        self.seen: dict[str, None] = {}

    @property
    def current(self) -> Iteration | None:
        """The iteration opened last, while it is open."""
        return next(reversed(self.open.values()), None)

    @current.setter
    def current(self, it: Iteration | None) -> None:
        """None: the caller took the last opened iteration over (a native launch that never
        logged Fully drawn); it no longer takes marks."""
        if it is not None:
            self.open.pop(it.app, None)
            self.open[it.app] = it
        elif self.open:
            self.open.popitem()

    def feed(self, line: str) -> Iteration | None:
        """One log line; the iteration it completed, if any."""
        self.lines += 1
        at = line.find(ENTRY)
        if at < 0:
            launch = parse_launch(line)
            return None if launch is None else self._launch(line, launch)
        # A mark: the hot path, in one function on the entry's text (calls cost here)
        text = line[at + _AFTER_ENTRY :].rstrip()
        seen = self.seen
        if text in seen:  # logcat restarted and replayed its buffer
            return None
        seen[text] = None
        if len(seen) > REMEMBERED:
            self._forget_oldest()
        raw = split_entry(text)
        if raw is None:
            self._unreadable(text)
            return None
        _, kind, name, context, _, duration, epoch = raw
        if name == "appLaunch":
            return self._open(context, epoch) if self._wanted(context) else None
        it = self.open.get(context)
        if it is None or it.launch_epoch is None:
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
            del self.open[context]
            return it
        return None

    @staticmethod
    def _take(it: Iteration, name: str, ms: float) -> None:
        """A mark's value; one logged again in the same launch with another value keeps the
        first and is named (it was replaced in silence)."""
        key = name if name.startswith(PREFIX) else PREFIX + name  # not coldlaunch.coldlaunch.x
        if not is_metric_name(key):  # "hero image loaded" failed every iteration of its job
            it.problems.append(f"{key[:140]!r}: not a metric name ({METRIC_NAME_RULE}); left out")
            return
        first = it.metrics.setdefault(key, ms)
        if first != ms:
            it.problems.append(
                f"{name}: logged again in this launch ({first:g} ms, then {ms:g} ms); the first "
                "kept"
            )

    def _unreadable(self, text: str) -> None:
        """A mark split_entry refused: named in the launch of the app it names (the longest
        open app name in it), else counted."""
        named = [app for app in self.open if app in text]
        if not named:
            self.unreadable += 1
            return
        it = self.open[max(named, key=len)]
        it.problems.append(f"an unreadable mark left out: {text[:120]!r}: {entry_problem(text)}")

    def finish(self) -> Iteration | None:
        """One iteration still open at the end of the log (incomplete), the first launched
        first; call it until None: apps may have launched at once."""
        if not self.open:
            return None
        done = self.open.pop(next(iter(self.open)))
        if not done.complete:
            done.problems.append("the log ends before fullyLoaded")
        return done

    def _open(self, app: str, epoch: int | None) -> Iteration | None:
        """A new launch of `app`; the app's launch before it, if still open (incomplete)."""
        closed = self.open.pop(app, None)
        if closed is not None and not closed.complete:
            closed.problems.append("the app launched again before fullyLoaded")
        self.open[app] = Iteration(self.count, app, epoch)
        self.count += 1
        return closed

    def _wanted(self, app: str) -> bool:
        return self.app is None or app == self.app

    def _replayed(self, line: str) -> bool:
        """Whether a launch line was seen before. Only a threadtime line carries its time
        (brief's "Displayed" lines of two launches can be equal), so only it can tell."""
        if line[2:3] != "-" or line[5:6] != " ":  # MM-DD hh:mm:ss.mmm ...
            return False
        key = line.rstrip()
        if key in self.seen:
            return True
        self.seen[key] = None
        if len(self.seen) > REMEMBERED:
            self._forget_oldest()
        return False

    def _forget_oldest(self) -> None:
        """Half the entries remembered, the oldest: one copy per REMEMBERED / 2 marks."""
        self.seen = dict.fromkeys(islice(self.seen, len(self.seen) // 2, None))

    def _launch(self, line: str, launch: Launch) -> Iteration | None:
        if not self._wanted(launch.package) or self._replayed(line):
            return None
        it = self.open.get(launch.package)
        if launch.kind == "displayed":
            displayed = PREFIX + "displayed"
            if it is not None and it.launch_epoch is not None and displayed not in it.metrics:
                it.metrics[displayed] = launch.ms  # Android's figure of the open Raptor launch
                return None
            closed = self._open(launch.package, None)
            native = self.open[launch.package]
            native.metrics[displayed] = launch.ms
            native.complete = True  # Fully drawn is optional: apps must report it
            return closed
        if it is None:
            self.orphans += 1
            return None
        it.metrics[PREFIX + "fullyDrawn"] = launch.ms
        if it.launch_epoch is not None:
            return None  # a Raptor launch ends at fullyLoaded
        del self.open[launch.package]
        return it

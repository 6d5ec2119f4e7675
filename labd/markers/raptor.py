"""Performance marks in logcat, as Mozilla's Raptor reads them ("Performance Testing Firefox
OS With Raptor", Mozilla Hacks), and Android's own app-launch lines.

    I/PerformanceTiming( 6118): Performance Entry: clock.gaiamobile.org|mark|visuallyLoaded|...
        ...|1074.739956|0.000000|1434771805380                        (one line, brief format)
    06-19 20:43:25.380  6118  6118 I PerformanceTiming: Performance Entry: ...   (threadtime)
    I/ActivityManager(  873): Displayed com.android.settings/.Settings: +1s234ms
    I ActivityTaskManager: Fully drawn com.example/.Main: +1s100ms

Entry fields: origin|type|name|start|duration|epoch. A name `mark@context` moves the mark to
another app's context (the home screen's `appLaunch@clock.gaiamobile.org` belongs to the clock
app). Times compare across processes through the epoch (ms since 1970), not the start.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from labd.stats import refusal

ENTRY = "Performance Entry: "
DISPLAYED = "Displayed "
FULLY_DRAWN = "Fully drawn "

# brief: "I/Tag( 123): ..."; threadtime: "06-19 20:43:25.380  123  456 I Tag: ..."
_LAUNCH_TIME = re.compile(r"\+(?:(\d+)s)?(?:(\d+)ms)?")


class Mark(NamedTuple):  # a tuple: built 5 times faster than a frozen dataclass
    origin: str
    kind: str  # "mark" or "measure"
    name: str  # without the @context
    context: str  # the app the mark belongs to
    start: float
    duration: float
    epoch: int


class Launch(NamedTuple):
    """ActivityManager's "Displayed" or "Fully drawn" line of a native app."""

    kind: str  # "displayed" or "fullyDrawn"
    component: str
    package: str
    ms: float


def pid_of(line: str) -> int:
    """The logging process (-1 when the line has no prefix). Not parsed for every mark: it
    costs a third of the parsing time and iterations are matched by context, not process.

    brief: "I/Tag( 123): ..."; threadtime: "06-19 20:43:25.380  123  456 I Tag: ..."."""
    try:
        if line[1:2] == "/":
            return int(line[line.index("(") + 1 : line.index(")")])
        if line[2:3] == "-" and line[5:6] == " ":  # MM-DD hh:mm:ss.mmm pid tid ...
            return int(line.split(None, 3)[2])
    except ValueError:  # a garbled prefix: no process to name
        return -1
    return -1


def parse_line(line: str) -> Mark | Launch | None:
    """One logcat line; None for anything else, including truncated or garbled marks."""
    at = line.find(ENTRY)
    if at >= 0:
        return parse_mark(line, at)
    return parse_launch(line)


def parse_mark(line: str, at: int) -> Mark | None:
    """The mark of a line holding ENTRY at `at`."""
    raw = split_entry(line[at + len(ENTRY) :].rstrip())
    if raw is None:
        return None
    origin, kind, name, context, start, duration, epoch = raw
    try:
        start_ms, duration_ms = float(start), float(duration)
    except ValueError:
        return None
    if refusal(start_ms) or duration_problem(duration_ms):
        return None  # nan, inf, 1e400 or a negative duration: garbled, not a time
    return Mark(origin, kind, name, context, start_ms, duration_ms, epoch)


def duration_problem(ms: float) -> str | None:
    """Why a mark's duration is no time (labd.stats.refusal, or below zero); None when it is
    one."""
    return refusal(ms) or ("below zero" if ms < 0 else None)


RawEntry = tuple[str, str, str, str, str, str, int]  # Mark's fields, start and duration as text


def split_entry(text: str) -> RawEntry | None:
    """The text after ENTRY in Mark's order, None when it is truncated or garbled. Start and
    duration stay text: the launch collector, the hot path, needs only a measure's duration."""
    fields = text.split("|")
    if len(fields) != 6:
        return None
    origin, kind, name, start, duration, epoch = fields
    if (kind != "mark" and kind != "measure") or not origin or not name:
        return None
    context = origin
    if "@" in name:
        name, _, context = name.partition("@")
    epoch_ms = epoch_of(epoch)
    if epoch_ms is None:
        return None
    return origin, kind, name, context, start, duration, epoch_ms


def entry_problem(text: str) -> str:
    """Why split_entry refused the text after ENTRY, for the user (not on the hot path)."""
    fields = text.split("|")
    if len(fields) != 6:
        return f"{len(fields)} fields, not the 6 of origin|type|name|start|duration|epoch"
    origin, kind, name, _, _, epoch = fields
    if kind != "mark" and kind != "measure":
        return f"type {kind!r} is neither mark nor measure"
    if not origin or not name:
        return "no origin" if not origin else "no name"
    return epoch_problem(epoch) or "unreadable"


MAX_EPOCH_MS = 10**15  # 31,000 years from 1970: no epoch is beyond it
_EPOCH_DIGITS = 20  # room for leading zeros


def epoch_of(text: str) -> int | None:
    """Milliseconds since 1970; None for text that is no such time (epoch_problem says why)."""
    # Raptor's epoch is JavaScript's Date.now(): whole milliseconds, digits only. A fraction
    # is no Raptor epoch (it was truncated in silence); nan, inf, 1e12 and Python's 1_000 fail
    # here too.
    if not (text.isdigit() and text.isascii()) or len(text) > _EPOCH_DIGITS:
        return None  # the length first: int() refuses 4,300 digits with a ValueError
    value = int(text)
    return value if value <= MAX_EPOCH_MS else None


def epoch_problem(text: str) -> str | None:
    """Why `text` is no epoch (epoch_of's None); None when it is one."""
    if epoch_of(text) is not None:
        return None
    shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
    whole, dot, fraction = text.partition(".")
    if dot and whole.isdigit() and fraction.isdigit() and whole.isascii() and fraction.isascii():
        return (
            f"epoch {shown} has a fraction: Raptor logs whole milliseconds (Date.now()), "
            "so it is no Raptor epoch"
        )
    if text.isdigit() and text.isascii():
        return f"epoch {shown} is past 10^15 ms since 1970"
    return f"epoch {shown} is not whole milliseconds since 1970 (digits only)"


def parse_launch(line: str) -> Launch | None:
    """ActivityManager's launch line, None for anything else."""
    if DISPLAYED not in line and FULLY_DRAWN not in line:  # most lines: skip the loop
        return None
    for marker, kind in ((DISPLAYED, "displayed"), (FULLY_DRAWN, "fullyDrawn")):
        at = line.find(marker)
        if at < 0:
            continue
        rest = line[at + len(marker) :]
        component, sep, when = rest.partition(": +")
        if not sep or "/" not in component:
            return None
        match = _LAUNCH_TIME.match("+" + when)
        if match is None or not (match.group(1) or match.group(2)):
            return None
        ms = int(match.group(1) or 0) * 1000 + int(match.group(2) or 0)
        if refusal(ms):  # "+1000...000s" of 400 digits: no float holds it
            return None
        return Launch(kind, component, component.split("/", 1)[0], float(ms))
    return None

"""Progress of a long analysis on stderr, so a user knows `labd analyze` is working (a 25 s
1080p recording takes 20 s or more). On a terminal one line is rewritten in place, a few
times a second; elsewhere (a CI log, with `--show-progress always`) a line every few seconds.
stdout keeps only the results."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import TextIO

from labd.capture import FrameItem, Recording, Wanted

PASSES = ("finding the sync screens and the changes", "measuring visual progress")


class ProgressLine:
    """One line of progress: rewritten in place on a terminal, else a line now and then."""

    def __init__(self, stream: TextIO, terminal: bool) -> None:
        self.stream, self.terminal = stream, terminal
        self.every = 0.25 if terminal else 5.0  # seconds between updates
        self.started = time.monotonic()
        self._last = 0.0
        self._width = 0

    def update(self, text: str, force: bool = False, clock: bool = True) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        line = f"{text}, {now - self.started:.0f} s" if clock else text
        if self.terminal:
            # \r and padding: the line is rewritten in place, the longer old one wiped out.
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self, ok: bool = True) -> None:
        """The last word: the time taken; after a failure only the line ended, so the
        error is printed on a line of its own."""
        if ok:
            elapsed = time.monotonic() - self.started
            self.update(f"analysed in {elapsed:.1f} s", force=True, clock=False)
        if self.terminal:
            self.stream.write("\n")
            self.stream.flush()


class ReportingRecording:
    """A recording that reports each pass over its frames (labd's analysis reads it twice)."""

    def __init__(self, inner: Recording, total: int | None, line: ProgressLine) -> None:
        self.inner, self.total, self.line = inner, total, line
        self.name = inner.name
        self.passes = 0

    def frames(self, wanted: Wanted | None = None) -> Iterator[FrameItem]:
        self.passes += 1
        step = PASSES[min(self.passes, len(PASSES)) - 1]
        label = f"pass {self.passes} of {len(PASSES)} ({step})"
        first = True  # a new pass is shown at once
        for item in self.inner.frames(wanted):
            self.line.update(f"{label}: frame {item[0] + 1}{self._of(item[0])}", force=first)
            first = False
            yield item

    def _of(self, index: int) -> str:
        if not self.total or index >= self.total:
            return ""  # a container that does not say how many frames it holds
        return f" of {self.total} ({100 * (index + 1) // self.total}%)"


def progress_line(when: str, stream: TextIO = sys.stderr) -> ProgressLine | None:
    """A progress line for `--show-progress WHEN` (auto: only on a terminal), or None."""
    terminal = stream.isatty()
    if when == "never" or (when == "auto" and not terminal):
        return None
    return ProgressLine(stream, terminal)

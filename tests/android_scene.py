"""The stand-in phone's screen: a scripted scene that reacts to touch the way a phone's list
or web page does, rendered to BGR frames at the display's refresh rate.

What it does, so tests can predict what the capture must show:
- a browser (a grey URL bar over a viewport) showing a solid colour, an error page or a web
  page that paints in steps after it arrived; an app activity (full screen, a long list);
- a finger drags the content 1:1; released faster than FLING_MIN_PX_S it flings on, slowing
  exponentially (Android's OverScroller is similar in shape, not in constants);
- content is painted at most PAINT_PX_S ahead of the viewport: a fast fling shows a
  checkerboard (white and #c0c0c0, 16 px squares, as Fennec drew it) where paint lags;
- `jank_every`: while the content moves, every n-th frame repeats the one before (a missed
  frame; counted in `janks` when it would have shown something new), so a test knows how
  many janks the analysis must find.

The display's beat (`render`, from the screen recorder) is the only thing that counts janks; a
screenshot reads the frame on the display and changes nothing, as screencap does.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

Image = NDArray[np.uint8]
BAR = 48  # the browser's URL bar, px
FLING_MIN_PX_S = 1000.0
FLING_TAU_S = 0.325
PAINT_PX_S = 2500.0
CHECKER = ((255, 255, 255), (192, 192, 192))
HOME_BGR = (90, 40, 20)
ERROR_BGR = (110, 110, 110)


def _list_content(width: int, height: int) -> Image:
    """A long list: rows of alternating tints, each with a dark block that moves with it."""
    content = np.empty((height, width, 3), np.uint8)
    for top in range(0, height, 80):
        n = top // 80
        content[top : top + 80] = (230 - (n % 5) * 20, 200 + (n % 3) * 20, 180 + (n % 4) * 15)
        left = 12 + (n * 37) % max(1, width - 120)
        content[top + 16 : top + 64, left : left + 96] = (40 + n % 7 * 20, 60, 120)
        content[top + 78 : top + 80] = 0
    return content


def _checkerboard(height: int, width: int, top: int) -> Image:
    rows = ((np.arange(height) + top) // 16)[:, None]
    cols = (np.arange(width) // 16)[None, :]
    pick = (rows + cols) % 2
    board = np.empty((height, width, 3), np.uint8)
    board[pick == 0] = CHECKER[0]
    board[pick == 1] = CHECKER[1]
    return board


@dataclass
class Scroller:
    """Content offset in px, driven by a finger and by flings."""

    offset: float = 0.0
    limit: float = 0.0
    velocity: float = 0.0  # px/s of a fling in progress
    finger: float | None = None  # the finger's y when it went down or last moved
    trail: list[tuple[float, float]] = field(default_factory=list)  # (time, y) of the finger

    def down(self, y: float, now: float) -> None:
        self.velocity = 0.0
        self.finger = y
        self.trail = [(now, y)]

    def move(self, y: float, now: float) -> None:
        if self.finger is None:
            self.down(y, now)
            return
        self.offset = min(self.limit, max(0.0, self.offset + self.finger - y))
        self.finger = y
        self.trail = [*self.trail[-4:], (now, y)]

    def up(self, y: float, now: float) -> None:
        self.move(y, now)
        (t0, y0), (t1, y1) = self.trail[0], self.trail[-1]
        speed = (y0 - y1) / (t1 - t0) if t1 > t0 else 0.0
        self.velocity = speed if abs(speed) >= FLING_MIN_PX_S else 0.0
        self.finger = None

    def step(self, dt: float) -> None:
        if self.velocity == 0.0:
            return
        self.offset = min(self.limit, max(0.0, self.offset + self.velocity * dt))
        self.velocity *= math.exp(-dt / FLING_TAU_S)
        if abs(self.velocity) < 50 or self.offset in (0.0, self.limit):
            self.velocity = 0.0

    @property
    def moving(self) -> bool:
        return self.velocity != 0.0 or self.finger is not None


class Scene:
    """What the phone shows. Every method is thread-safe (input arrives on adb's threads,
    frames are rendered on the screen recorder's)."""

    def __init__(self, size: tuple[int, int] = (360, 640), jank_every: int = 0) -> None:
        self.width, self.height = size
        self.jank_every = jank_every
        self.lock = threading.Lock()
        self.mode = "home"  # home, color, error, page, app
        self.color = (0, 0, 0)  # RGB of a solid page
        self.content = _list_content(self.width, self.height * 8)
        self.scroller = Scroller()
        self.page_shown_at = 0.0  # a web page paints in steps from here
        self.painted = (0.0, 0.0)  # content rows painted, [top, bottom)
        self.flash: tuple[int, int, float] | None = None  # a tap's highlight (x, y, until)
        self.last_step = time.monotonic()
        self.moving_frames = 0
        self.previous: Image | None = None  # the frame on the display
        self.beating = False  # a recorder renders the display on its beat
        self.frames_rendered = 0
        self.janks = 0  # frames repeated on purpose while moving

    # What is on screen -------------------------------------------------------------------

    def show(self, mode: str, color: tuple[int, int, int] = (0, 0, 0)) -> None:
        with self.lock:
            self.mode, self.color = mode, color
            top = BAR if mode in ("color", "error", "page") else 0
            self.scroller = Scroller(limit=float(self.content.shape[0] - (self.height - top)))
            self.page_shown_at = time.monotonic()
            self.painted = (0.0, float(2 * self.height))

    def viewport_top(self) -> int:
        return BAR if self.mode in ("color", "error", "page") else 0

    # Input (screen coordinates) -------------------------------------------------------------

    def touch(self, action: str, x: float, y: float) -> None:
        now = time.monotonic()
        with self.lock:
            self._advance(now)
            if action == "DOWN":
                self.scroller.down(y, now)
            elif action == "MOVE":
                self.scroller.move(y, now)
            elif action == "UP":
                self.scroller.up(y, now)
            elif action == "CANCEL":
                self.scroller.finger = None

    def tap(self, x: int, y: int) -> None:
        with self.lock:
            self.flash = (x, y, time.monotonic() + 0.1)

    # Frames -----------------------------------------------------------------------------------

    def _advance(self, now: float) -> None:
        if now <= self.last_step:  # a late frame drawn after an input moved the scene on
            return
        dt, self.last_step = now - self.last_step, now
        self.scroller.step(dt)
        view = self.height - self.viewport_top()
        top, bottom = self.painted
        want_top, want_bottom = self.scroller.offset - view, self.scroller.offset + 2 * view
        reach = PAINT_PX_S * dt  # paint catches up with the viewport at this speed
        if bottom < want_bottom:
            bottom = min(want_bottom, bottom + reach)
        if top > want_top:
            top = max(want_top, top - reach)
        self.painted = (top, bottom)

    def render(self, at: float | None = None) -> Image:
        """The display's frame for `at` (its beat's time, so a frame drawn late still shows
        what it would have shown on time; now by default)."""
        now = time.monotonic() if at is None else at
        with self.lock:
            self._advance(now)
            moving = self.scroller.moving
            self.frames_rendered += 1
            frame = self._draw(now)
            if moving:
                self.moving_frames += 1
                jank = self.jank_every and self.moving_frames % self.jank_every == 0
                # Only a frame that would have shown something new can be missed visibly.
                if jank and self.previous is not None and not np.array_equal(frame, self.previous):
                    self.janks += 1
                    return self.previous
            self.previous = frame
            return frame

    def screenshot(self) -> Image:
        """What screencap reads: the frame on the display while a recorder renders it on its
        beat, else the scene drawn for now."""
        with self.lock:
            if self.beating and self.previous is not None:
                return self.previous.copy()
            now = time.monotonic()
            self._advance(now)
            return self._draw(now)

    def _draw(self, now: float) -> Image:
        frame = np.empty((self.height, self.width, 3), np.uint8)
        if self.mode == "home":
            frame[:] = HOME_BGR
            return frame
        top = self.viewport_top()
        if top:
            frame[:top] = (221, 221, 221)
            frame[top - 1] = (150, 150, 150)
        view = frame[top:]
        if self.mode == "color":
            view[:] = self.color[::-1]
        elif self.mode == "error":
            view[:] = ERROR_BGR
        else:
            self._draw_content(view)
            if self.mode == "page":
                self._unpainted_page(view, now - self.page_shown_at)
        if self.flash is not None and now < self.flash[2]:
            x, y = self.flash[0], self.flash[1]
            frame[max(0, y - 20) : y + 20, max(0, x - 20) : x + 20] = (0, 200, 255)
        return frame

    def _draw_content(self, view: Image) -> None:
        offset = int(self.scroller.offset)
        rows = view.shape[0]
        view[:] = self.content[offset : offset + rows]
        painted_top, painted_bottom = (int(v) for v in self.painted)
        below = max(0, min(rows, painted_bottom - offset))
        if below < rows:  # paint lags behind a fast fling downwards
            view[below:] = _checkerboard(rows - below, view.shape[1], offset + below)
        above = max(0, min(rows, painted_top - offset))
        if above > 0:
            view[:above] = _checkerboard(above, view.shape[1], offset)

    @staticmethod
    def _unpainted_page(view: Image, age_s: float) -> None:
        """A web page paints top to bottom over 0.6 s after it arrived: white first."""
        share = min(1.0, max(0.0, age_s / 0.6))
        painted = int(view.shape[0] * round(share * 4) / 4)  # four visible steps
        view[painted:] = 255

"""A gesture script: swipes and flings given by any two of distance, velocity and duration,
taps, keys and pauses, turned into what the phone's input service is told.

The input service's shell command injects one pointer (`input swipe`, `input motionevent`
take no pointer id), so a pinch cannot be sent that way; a script asking for one is refused
before the job starts, with that reason, rather than run as something else.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from labd.sdk import UsageError
from labd_android.input import MAX_PIXEL, keycode

Direction = Literal["up", "down", "left", "right"]
# Where the finger travels: "up" moves the content up (shows what is further down).
UNIT = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}
FLING_MS = 80.0  # a flick: released fast, the content flies on
SWIPE_MS = 300.0


class GestureStep(BaseModel):
    """One step of the script."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["swipe", "fling", "tap", "key", "pause", "pinch"] = Field(
        description="swipe (a drag), fling (a fast flick the content keeps moving after), tap, "
        "key (a hardware key), pause, pinch (refused on Android: one pointer only)."
    )
    direction: Direction = Field("up", description="Where the finger moves.")
    distance_px: float | None = Field(None, gt=0, le=10_000, description="How far it moves.")
    velocity_px_s: float | None = Field(None, gt=0, le=100_000, description="How fast it moves.")
    duration_ms: float | None = Field(None, gt=0, le=60_000, description="How long it moves.")
    x: int | None = Field(
        None, ge=0, le=MAX_PIXEL, description="Where it starts (default: the centre)."
    )
    y: int | None = Field(None, ge=0, le=MAX_PIXEL)
    key: str = Field("", description="For kind = key: back, home, enter, ... or KEYCODE_...")
    scale: float | None = Field(None, gt=0, description="For kind = pinch: the zoom factor.")
    repeat: int = Field(1, ge=1, le=100, description="The step this many times.")
    then_ms: float = Field(300, ge=0, le=60_000, description="Wait after it (each repeat).")

    @field_validator("key", mode="before")
    @classmethod
    def _code_as_text(cls, value: object) -> object:
        """`key = 4` in TOML is the key code 4, as `key = "4"` is."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _complete(self) -> GestureStep:
        if self.kind in ("swipe", "fling"):
            motion = (self.distance_px, self.velocity_px_s, self.duration_ms)
            given = [v is not None for v in motion]
            if sum(given) == 3:
                raise ValueError(
                    "give two of distance_px, velocity_px_s and duration_ms: the third follows"
                )
            if self.distance_px is None and sum(given) < 2:
                raise ValueError(f"a {self.kind} needs distance_px (or velocity and duration)")
        if self.kind == "key":
            if not self.key:
                raise ValueError("a key step needs key (back, home, enter, ... or KEYCODE_...)")
            try:
                keycode(self.key)
            except UsageError as e:
                raise ValueError(str(e)) from None
        if self.kind == "pause" and self.duration_ms is None:
            raise ValueError("a pause needs duration_ms")
        return self

    def motion(self) -> tuple[float, float]:
        """(distance px, duration ms) of a swipe or fling."""
        d, v, t = self.distance_px, self.velocity_px_s, self.duration_ms
        if d is not None and t is not None:
            return d, t
        if d is not None and v is not None:
            return d, d / v * 1000
        if v is not None and t is not None:
            return v * t / 1000, t
        assert d is not None
        return d, FLING_MS if self.kind == "fling" else SWIPE_MS

    def swipe(self, screen: tuple[int, int]) -> tuple[int, int, int, int, int]:
        """x1, y1, x2, y2 and duration (ms) for `input swipe`, kept on the screen."""
        width, height = screen
        distance, duration = self.motion()
        dx, dy = UNIT[self.direction]
        x1 = self.x if self.x is not None else width // 2 - int(dx * distance / 2)
        y1 = self.y if self.y is not None else height // 2 - int(dy * distance / 2)
        x2 = min(width - 1, max(0, x1 + int(dx * distance)))
        y2 = min(height - 1, max(0, y1 + int(dy * distance)))
        return x1, y1, x2, y2, max(1, round(duration))


def refused_steps(steps: list[GestureStep]) -> list[str]:
    """What the phone's input service cannot do in this script, by step."""
    return [
        f"params.steps.{n}: pinch needs two pointers at once; Android's shell input "
        "(`input swipe`, `input motionevent`) injects one, so labd cannot pinch a phone"
        for n, step in enumerate(steps)
        if step.kind == "pinch"
    ]

"""Refusals of MQTT messages no principal signed (junk, a scanner, a client set up wrong): each
is answered on <prefix>/errors and audited, up to a rate. Past it they are only counted, so a
flood neither delays the lab's real requests behind thousands of answers nor fills the log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

log = structlog.get_logger("labd.mqtt")


class UnsignedFlood:
    RATE = 20.0  # refusals answered a second
    BURST = 100.0  # answered at once after a quiet spell
    EVERY_S = 60.0  # how often the ones left unanswered are said

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.tokens = self.BURST
        self.stamp = clock()
        self.left_out = 0  # since the last warning
        self._timer: asyncio.TimerHandle | None = None

    def admit(self) -> bool:
        """Whether to answer and audit this refusal; False past the rate (counted, and said
        in one warning a minute while it lasts, the last a minute after it ended)."""
        now = self.clock()
        self.tokens = min(self.BURST, self.tokens + (now - self.stamp) * self.RATE)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        self.left_out += 1
        if self._timer is None:
            self._say()
        return False

    def _say(self) -> None:
        """Say how many were left out since the last warning, and look again in a minute
        (a flood that stopped is said once more, then the timer stops)."""
        self._timer = None
        if not self.left_out:
            return
        log.warning(
            "unsigned mqtt messages are coming faster than labd answers them; the rest are "
            "refused without an answer on the errors topic or an audit line",
            answered_per_s=self.RATE,
            left_out=self.left_out,
        )
        self.left_out = 0
        self._timer = asyncio.get_running_loop().call_later(self.EVERY_S, self._say)

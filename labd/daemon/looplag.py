"""Measures event-loop lag: how much later than asked a sleeping task wakes up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

log = structlog.get_logger("labd.looplag")

WARN_LAG = 0.25  # seconds; a blocked loop this long is worth an operator's attention


async def monitor_loop_lag(observe: Callable[[float], None], interval: float = 0.1) -> None:
    """Forever: sleep `interval`, hand the overshoot to `observe`, warn on a long stall."""
    loop = asyncio.get_running_loop()
    while True:
        start = loop.time()
        await asyncio.sleep(interval)
        lag = max(0.0, loop.time() - start - interval)
        observe(lag)
        if lag >= WARN_LAG:
            log.warning("event loop was blocked", lag_s=round(lag, 3))

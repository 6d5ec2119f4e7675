"""Lines of one kind said at most once a minute: a rule for whatever anyone who can reach a
port can cause (the audit trail, listeners' warnings), kept below every layer that logs."""

from __future__ import annotations

import time


class OncePerMinute:
    """Lines of one kind said at most once a minute each: what anyone who can reach a port
    can cause (a refused connection, a failed handshake) must not fill the log."""

    KINDS = 10_000  # past this many kinds, those not said within the minute are forgotten

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s = every_s
        self._said_at: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def due(self, kind: str) -> int | None:
        """None: leave this line out (counted); else say it, with this many left out since
        the last one of its kind."""
        now = time.monotonic()
        if now - self._said_at.get(kind, -self.every_s) < self.every_s:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return None
        if len(self._said_at) >= self.KINDS:  # kinds keyed by a client's address, say
            self._said_at = {k: t for k, t in self._said_at.items() if now - t < self.every_s}
            self._left_out = {k: n for k, n in self._left_out.items() if k in self._said_at}
        self._said_at[kind] = now
        return self._left_out.pop(kind, 0)

"""Per-principal rate limits: a sliding minute of submissions for each authenticated name."""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Callable

from labd.auth.principals import Principal
from labd.errors import AuthError

WINDOW_S = 60.0


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._recent: defaultdict[str, deque[float]] = defaultdict(deque)

    def take(self, principal: Principal) -> None:
        """Count one submission; AuthError("rate_limited") when over the principal's limit.
        Every submission counts, refused ones too: a client flooding bad requests is limited."""
        now = self.clock()
        recent = self._recent[principal.name]
        while recent and now - recent[0] > WINDOW_S:
            recent.popleft()
        if len(recent) >= principal.submits_per_minute:
            raise AuthError(
                "rate_limited",
                f"principal {principal.name!r} made {len(recent)} submissions in the last minute "
                f"(limit {principal.submits_per_minute}); try again later",
            )
        recent.append(now)

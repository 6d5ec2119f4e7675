"""The audit trail: every write request, who made it, on what, from where, and the verdict.

Each is one structured log line with `audit = true` (logger `labd.audit`), so operators can
route them apart; refusals are also published as `AccessRefused` events, counted in /metrics.
"""

from __future__ import annotations

import structlog

from labd.events import AccessRefused, EventBus
from labd.throttle import OncePerMinute

log = structlog.get_logger("labd.audit")
ANONYMOUS = "-"  # the principal of a refusal no credential named


class Audit:
    def __init__(self, bus: EventBus) -> None:
        self.bus = bus
        # HTTP refusals no principal is named in (an unknown token) come from anyone who can
        # reach a port: one line a minute per source and reason, with how many it left out (a
        # tester's loop of 300 wrong sign-ins wrote 97 KB). Each is still counted in /metrics.
        # MQTT's have their own limit (labd.mqtt.flood), all from one source, the broker.
        self._anonymous = OncePerMinute()

    def counted(
        self, channel: str, principal: str, action: str, target: str, reason: str, count: int = 1
    ) -> None:
        """Refusals counted in /metrics alone: of a flood, left unanswered and unlogged
        (labd.mqtt.flood says how many)."""
        self.bus.publish(
            AccessRefused(
                channel=channel,
                reason=reason,
                principal=principal,
                action=action,
                target=target,
                count=count,
            )
        )

    def allowed(self, channel: str, principal: str, action: str, target: str, source: str) -> None:
        log.info(
            "request allowed",
            audit=True,
            channel=channel,
            principal=principal,
            action=action,
            target=target,
            source=source,
            verdict="allowed",
        )

    def refused(
        self,
        channel: str,
        principal: str,
        action: str,
        target: str,
        source: str,
        reason: str,
        detail: str,
    ) -> None:
        self.counted(channel, principal, action, target, reason)
        left_out = 0
        if principal == ANONYMOUS and channel != "mqtt":
            # A local account on the Unix socket is one source whatever process it runs
            # ("uid 65534 (pid 30584)"): a loop of new processes was a new source each.
            who = source.split(" (pid ", 1)[0]
            due = self._anonymous.due(f"{channel} {reason} {who}")
            if due is None:
                return
            left_out = due
        log.warning(
            "request refused",
            audit=True,
            channel=channel,
            principal=principal,
            action=action,
            target=target,
            source=source,
            verdict="refused",
            reason=reason,
            detail=detail,
            **({"left_out": left_out} if left_out else {}),
        )

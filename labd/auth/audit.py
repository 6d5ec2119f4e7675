"""The audit trail: every write request, who made it, on what, from where, and the verdict.

Each is one structured log line with `audit = true` (logger `labd.audit`), so operators can
route them apart; refusals are also published as `AccessRefused` events, counted in /metrics.
"""

from __future__ import annotations

import structlog

from labd.events import AccessRefused, EventBus

log = structlog.get_logger("labd.audit")


class Audit:
    def __init__(self, bus: EventBus) -> None:
        self.bus = bus

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
        )
        self.bus.publish(
            AccessRefused(
                channel=channel, reason=reason, principal=principal, action=action, target=target
            )
        )

"""Counters of requests refused and messages set aside, fed by events."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from labd.events import AccessRefused, Event, EventBus, OutboxRowSetAside, dispatch
from labd.tasks import TaskSet

# Every reason labd refuses a request for, so each series exists (at 0) from the start.
REFUSAL_REASONS = (
    "unauthenticated",
    "unsigned",
    "malformed",
    "unknown_principal",
    "unknown_key",
    "bad_signature",
    "expired",
    "future",
    "replayed",
    "forbidden",
    "rate_limited",
    "quota_exceeded",
    "invalid",
    "invalid_spec",
    "conflict",
    "not_found",
    "unavailable",
    "internal",  # a request labd failed on itself (a bug)
    "inbox_full",  # MQTT: dropped unread, arriving faster than labd reads (labd.mqtt.flood)
    "too_large",  # the console: a form over its limit
    "too_slow",  # the console: a form that did not arrive in time
    "length_required",  # the console: a form sent without its length (chunked)
    "bad_csrf_token",  # the console: a form's anti-forgery token missing or wrong
    # the HTTP API's front door (labd.daemon.guard)
    "host_not_allowed",
    "origin_not_allowed",
    "unsupported_media_type",
    "no_credential",
    "bad_credential",
    "bad_token",
    "unknown_peer",
)


class AccessMetrics:
    """A component: `labd_auth_refusals_total{channel,reason}` and
    `labd_outbox_set_aside_total{stream}`."""

    name = "access-metrics"

    def __init__(self, bus: EventBus, registry: CollectorRegistry) -> None:
        self.bus = bus
        self.refusals = Counter(
            "labd_auth_refusals",
            "Requests refused, by channel (mqtt, http) and reason.",
            ["channel", "reason"],
            registry=registry,
        )
        for channel in ("mqtt", "http"):
            for reason in REFUSAL_REASONS:
                self.refusals.labels(channel, reason)
        self.set_aside = Counter(
            "labd_outbox_set_aside",
            "Outbox messages that could not be published and were set aside in the store.",
            ["stream"],
            registry=registry,
        )
        for stream in ("job", "alert"):
            self.set_aside.labels(stream)
        self._events = bus.subscribe("access-metrics", AccessRefused, OutboxRowSetAside)
        self._tasks = TaskSet("access-metrics")

    async def start(self) -> None:
        self._tasks.supervise("events", lambda: dispatch(self._events, self._on_event), self.bus)

    async def stop(self, grace: float) -> None:
        self.bus.unsubscribe(self._events)
        await self._tasks.cancel_all(grace)

    async def _on_event(self, event: Event) -> None:
        if isinstance(event, AccessRefused):
            self.refusals.labels(event.channel, event.reason).inc(event.count)
        elif isinstance(event, OutboxRowSetAside):
            self.set_aside.labels(event.stream).inc()

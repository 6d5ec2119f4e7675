"""Refusals anyone who can reach a port can cause must not fill the audit trail."""

from __future__ import annotations

import time

import structlog

from labd.auth import Audit
from labd.events import EventBus


def refusals(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [line for line in logs if line["event"] == "request refused"]


def test_unknown_tokens_are_one_line_a_minute_per_source_and_each_is_counted() -> None:
    """A tester's loop of 300 wrong sign-ins wrote 300 audit lines (97 KB)."""
    bus = EventBus()
    audit = Audit(bus)
    with structlog.testing.capture_logs() as logs:
        for _ in range(300):
            audit.refused("http", "-", "sign_in", "/console/login", "10.0.0.9", "bad_token", "x")
        audit.refused("http", "-", "sign_in", "/console/login", "10.0.0.7", "bad_token", "x")
        # On the Unix socket the source is the account: each new process is no new source.
        for pid in range(100, 105):
            audit.refused("http", "-", "list", "/api/v1/jobs", f"uid 7 (pid {pid})", "peer", "x")
        # A named principal's refusals are each the audit's: who did what is kept.
        for _ in range(3):
            audit.refused("http", "ci", "cancel", "/api/v1/jobs/j", "10.0.0.9", "forbidden", "x")
        # MQTT's have their own flood limit (labd.mqtt.flood).
        for _ in range(3):
            audit.refused("mqtt", "-", "submit", "jobs/submit", "broker", "bad_signature", "x")
    lines = refusals(logs)
    assert [(line["source"], line["reason"]) for line in lines] == [
        ("10.0.0.9", "bad_token"),
        ("10.0.0.7", "bad_token"),
        ("uid 7 (pid 100)", "peer"),
        *[("10.0.0.9", "forbidden")] * 3,
        *[("broker", "bad_signature")] * 3,
    ]
    assert bus.published["access_refused"] == 312  # /metrics counts every one
    audit._anonymous.every_s = 0.01  # a minute later, in short
    time.sleep(0.02)
    with structlog.testing.capture_logs() as logs:
        audit.refused("http", "-", "sign_in", "/console/login", "10.0.0.9", "bad_token", "x")
    (line,) = refusals(logs)
    assert line["left_out"] == 299

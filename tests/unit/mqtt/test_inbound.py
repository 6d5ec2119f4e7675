"""Inbound limits that need no broker: the per-sender rate limit and the payload size."""

from __future__ import annotations

import json
from pathlib import Path

from labd.config import MqttSettings
from labd.mqtt import Inbound, Topics
from labd.mqtt.messages import ErrorMessage, SubmitAnswer
from labd.store import Store
from tests.integration.scheduler.test_scheduler import make_lab

TOPICS = Topics("labd/v1/t")


async def test_rate_limit_per_sender_and_window(tmp_path: Path) -> None:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'db'}")
    lab = await make_lab(store, tmp_path, ["d1"])
    now = [0.0]
    inbound = Inbound(
        MqttSettings(submits_per_minute=3),
        TOPICS,
        lab.jobs,
        lab.scheduler,
        lab.pool,
        clock=lambda: now[0],
    )

    async def submit(sender: str, n: int) -> object:
        spec = {"suite": "s", "test": "t", "scenario": "script", "device": {"platform": "scripted"}}
        body = json.dumps({"id": f"{sender}-{n}", "sender": sender, "spec": spec}).encode()
        (reply, *_) = await inbound.handle(TOPICS.submit, body, "answers") or [None]
        return reply.message if reply else None  # type: ignore[attr-defined]

    try:
        for n in range(3):
            assert isinstance(await submit("ci", n), SubmitAnswer)
        refused = await submit("ci", 3)
        assert isinstance(refused, ErrorMessage)
        assert "submitted 3 jobs in the last minute (limit 3)" in refused.problems[0]
        assert isinstance(await submit("other", 0), SubmitAnswer)  # per sender
        now[0] = 61.0
        assert isinstance(await submit("ci", 4), SubmitAnswer)  # the window moved on
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
        await store.close()

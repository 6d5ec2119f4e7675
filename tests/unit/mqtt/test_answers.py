"""Answers waiting for the broker are bounded: past the bound, reading waits for them (and the
bounded inbox takes the flood) rather than holding every answer of a flood in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from labd.auth import Audit
from labd.config import MqttSettings
from labd.events import EventBus
from labd.mqtt.bridge import MqttBridge
from labd.mqtt.messages import Message
from labd.mqtt.requests import Reply
from labd.mqtt.topics import Topics


class AnsweringEverything:
    def __init__(self, bus: EventBus) -> None:
        self.audit = Audit(bus)

    async def handle(self, topic: str, payload: bytes, *_: Any) -> list[Reply]:
        return [Reply("lab/answers", Message())]


class Flood:
    """A client whose broker has 5,000 requests waiting; counts what labd took of them."""

    def __init__(self) -> None:
        self.taken = 0

    @property
    def messages(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        for n in range(5_000):
            self.taken += 1
            yield SimpleNamespace(
                topic=SimpleNamespace(value="lab/jobs/query"), properties=None, payload=b"%d" % n
            )


async def test_reading_waits_while_the_answers_wait_and_goes_on_as_they_leave() -> None:
    bus = EventBus()
    bridge = MqttBridge(
        MqttSettings(), ("127.0.0.1", 1883), Topics("lab"), "h", "c",
        store=None, inbound=AnsweringEverything(bus), pool=None, bus=bus,  # type: ignore[arg-type]
    )  # fmt: skip
    flood, answers = Flood(), asyncio.Queue[Reply](10)
    reading = asyncio.create_task(bridge._read(flood, answers))  # type: ignore[arg-type]
    await asyncio.sleep(0.2)
    assert not reading.done()  # waiting, not failed: the session goes on
    assert answers.qsize() == 10 and flood.taken == 11  # the eleventh's answer waits for room
    for _ in range(5):
        answers.get_nowait()
    await asyncio.sleep(0.1)
    assert answers.qsize() == 10 and flood.taken == 16
    reading.cancel()

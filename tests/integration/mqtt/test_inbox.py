"""labd's inbox of incoming MQTT messages, bounded, against a real Mosquitto: a flood faster
than labd reads grew the daemon by 4.5 KB a message (150,000 junk messages: 1 GB, kept)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiomqtt
from structlog.testing import capture_logs

from labd.auth import Audit
from labd.config import MqttSettings
from labd.events import AccessRefused, EventBus
from labd.mqtt.client import broker_client
from labd.mqtt.flood import InboxOverflow


async def flooded(port: int, overflow: InboxOverflow, payloads: list[bytes]) -> list[bytes]:
    """`payloads` published to a labd client that reads nothing until all have arrived, then
    what it reads."""
    will = aiomqtt.Will("flood/will", b"", 1, False)
    client = broker_client(
        MqttSettings(url=f"mqtt://127.0.0.1:{port}"),
        ("127.0.0.1", port),
        "labd-inbox-test",
        aiomqtt.ProtocolVersion.V5,
        ("", ""),
        will,
        overflow.inbox(),
    )
    read: list[bytes] = []
    async with client:
        await client.subscribe("flood/#", qos=1)
        async with aiomqtt.Client("127.0.0.1", port) as sender:
            for payload in payloads:
                await sender.publish("flood/in", payload, qos=1)
        await asyncio.sleep(0.5)  # the last ones reach labd's client (or its overflow)
        messages = aiter(client.messages)
        while True:
            try:
                message = await asyncio.wait_for(anext(messages), 0.5)
            except TimeoutError:
                break
            assert isinstance(message.payload, bytes)
            read.append(message.payload)
    return read


async def test_messages_past_the_inbox_are_dropped_counted_and_said_once(
    mosquitto_factory: Any,
) -> None:
    broker = mosquitto_factory()
    bus = EventBus()
    counted = bus.subscribe("refusals", AccessRefused)
    overflow = InboxOverflow(Audit(bus), messages=50)
    payloads = [b"junk %d" % i for i in range(400)]
    with capture_logs() as logs:
        read = await flooded(broker.port, overflow, payloads)
        await asyncio.sleep(1.2)  # counted each second
    assert read == payloads[:50]  # the first 50, in order; the rest dropped
    refusals = []
    while (event := counted.get_nowait()) is not None:
        assert isinstance(event, AccessRefused)
        refusals.append(event)
    assert {e.reason for e in refusals} == {"inbox_full"}
    assert sum(e.count for e in refusals) == 350
    warnings = [e for e in logs if "inbox is full" in e["event"]]
    assert len(warnings) == 1 and warnings[0]["inbox_messages"] == 50


async def test_the_inbox_holds_a_bounded_number_of_payload_bytes(mosquitto_factory: Any) -> None:
    broker = mosquitto_factory()
    overflow = InboxOverflow(Audit(EventBus()), size=100_000)
    payloads = [bytes([i]) * 20_000 for i in range(20)]  # 400 KB in all
    read = await flooded(broker.port, overflow, payloads)
    assert read == payloads[:5]  # 5 x 20,000 bytes fill it; the sixth would pass its bound


async def test_signed_messages_have_room_of_their_own(mosquitto_factory: Any) -> None:
    """A flood of junk filled the inbox and took the lab's signed requests with it (19 of 28
    in `benchmarks/mqtt_flood_bench.py`): those carrying a signature have as much room again."""
    broker = mosquitto_factory()
    overflow = InboxOverflow(Audit(EventBus()), messages=50)
    junk = [b"junk %d" % i for i in range(200)]
    requests = [b'{"auth": {"n": %d}}' % i for i in range(10)]
    read = await flooded(broker.port, overflow, junk[:100] + requests + junk[100:])
    assert read == junk[:50] + requests

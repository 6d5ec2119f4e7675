"""What a topic labd publishes on may hold: what a broker would refuse is never sent."""

from __future__ import annotations

from typing import Any

import pytest

from labd.mqtt.client import publish
from labd.mqtt.topics import MAX_TOPIC_BYTES, topic_problem

FINE = ["labd/v1/lab/replies/ci/1", "a/\u00e9/\U0001f600", "a/\ufffd", "x" * MAX_TOPIC_BYTES]
BAD = {
    "a/\x00": "a control character (U+0000)",
    "a/\x1f": "a control character (U+001F)",
    "a/\x7f": "a control character (U+007F)",
    "a/\x9f": "a control character (U+009F)",
    "a/\ud800": "a surrogate (U+D800)",
    "a/\ufdd0": "a Unicode non-character (U+FDD0)",
    "a/\ufdef": "a Unicode non-character (U+FDEF)",
    "a/\ufffe": "a Unicode non-character (U+FFFE)",
    "a/\U0001ffff": "a Unicode non-character (U+1FFFF)",
    "a/\U0010fffe": "a Unicode non-character (U+10FFFE)",
    "a/#": "the wildcard '#'",
    "a/+/b": "the wildcard '+'",
}


@pytest.mark.parametrize("topic", FINE)
def test_topics_a_broker_takes(topic: str) -> None:
    assert topic_problem(topic) is None


@pytest.mark.parametrize(("topic", "said"), BAD.items())
def test_topics_a_broker_finds_malformed_are_named(topic: str, said: str) -> None:
    assert topic_problem(topic) == f"contains {said} at 2"


def test_an_empty_or_over_long_topic_is_named() -> None:
    assert topic_problem("") == "is empty"
    long = "\u00e9" * (MAX_TOPIC_BYTES // 2 + 1)  # 2 bytes each in UTF-8
    assert (
        topic_problem(long) == f"is {MAX_TOPIC_BYTES + 1} bytes long in UTF-8 (MQTT allows 65535)"
    )


class Client:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    async def publish(self, *args: Any, **kwargs: Any) -> None:
        self.sent.append(args)


async def test_a_publish_on_a_topic_that_cannot_be_valid_is_never_sent() -> None:
    """The client library lets a NUL through, and Mosquitto then drops labd's connection."""
    client = Client()
    for topic in BAD:
        with pytest.raises(ValueError, match="not published: topic"):
            await publish(client, topic, b"{}")  # type: ignore[arg-type]
    assert client.sent == []
    await publish(client, FINE[0], b"{}", True)  # type: ignore[arg-type]
    assert client.sent == [(FINE[0], b"{}", 1, True)]

"""The `labd` command as an MQTT client of a running daemon: submit and follow, show, cancel.

It reaches the broker the daemon uses (mqtt.url, else the embedded address), and talks the
same topics a CI system does, so what it shows is what CI sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import aiomqtt

from labd.config import Settings
from labd.errors import LabdError, UsageError


def _client(settings: Settings) -> aiomqtt.Client:
    m = settings.mqtt
    if m.url:
        parts = urlsplit(m.url)
        host = parts.hostname or "localhost"
        port = parts.port or (8883 if parts.scheme == "mqtts" else 1883)
    else:
        host, port = m.embedded_host, m.embedded_port
    tls = aiomqtt.TLSParameters(ca_certs=m.tls_ca or None) if m.url.startswith("mqtts") else None
    return aiomqtt.Client(
        host,
        port,
        username=m.username or None,
        password=m.password or None,
        identifier=f"labd-cli-{uuid.uuid4().hex[:8]}",
        tls_params=tls,
        timeout=10,
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )


def _prefix(settings: Settings) -> str:
    return settings.mqtt.prefix or f"labd/v1/{settings.daemon.lab}"


async def submit_and_follow(
    settings: Settings,
    spec: dict[str, Any],
    job_id: str,
    sender: str,
    source: str,
    wait: bool,
    answer_within: float,
    on_event: Callable[[dict[str, Any]], None] = lambda _: None,
) -> dict[str, Any]:
    """Submit; return {"job_id", "events", "result"} once answered (or, with wait, finished)."""
    prefix, job_id = _prefix(settings), job_id or uuid.uuid4().hex
    events: list[dict[str, Any]] = []
    seen: set[str] = set()
    result: dict[str, Any] | None = None
    try:
        async with _connected(settings, answer_within) as client:
            await _wait_for_a_host(client, prefix, answer_within)
            events_topic = f"{prefix}/jobs/{job_id}/events"
            await client.subscribe(events_topic, qos=1)
            await client.subscribe(f"{prefix}/results/{spec['suite']}/{spec['test']}", qos=1)
            request = {
                "schema_version": 1,
                "id": job_id,
                "sender": sender,
                "source": source,
                "spec": spec,
            }
            await client.publish(f"{prefix}/jobs/submit", json.dumps(request), qos=1)
            async with asyncio.timeout(answer_within) as timer:
                async for message in client.messages:
                    body = json.loads(message.payload)
                    topic = message.topic.value
                    if topic.startswith(f"{prefix}/results/"):
                        if body.get("job_id") == job_id:
                            result = body
                    elif topic != events_topic:
                        continue  # e.g. a host status still queued from before
                    elif body["event_id"] not in seen:  # at-least-once: drop duplicates
                        seen.add(body["event_id"])
                        events.append(body)
                        on_event(body)
                        timer.reschedule(None)  # the daemon answered: no time limit now
                    if not events:
                        continue
                    last = events[-1]["kind"]
                    # Without --wait the answer is enough; with it, the end and its result
                    # (published right after the "finished" event).
                    if not wait or last == "rejected" or (last == "finished" and result):
                        break
    except TimeoutError:
        raise LabdError(
            f"no answer from labd on {prefix} within {answer_within:g} s (is `labd run` running?)"
        ) from None
    except aiomqtt.MqttError as e:
        raise LabdError(f"cannot reach the MQTT broker: {e} (is `labd run` running?)") from e
    if events and events[0]["kind"] == "rejected":
        raise UsageError("\n".join(events[0]["data"]["problems"]))
    return {"job_id": job_id, "events": events, "result": result}


@contextlib.asynccontextmanager
async def _connected(settings: Settings, within: float) -> AsyncIterator[aiomqtt.Client]:
    """A connected client, trying for `within` seconds: on a bare machine the broker is the
    daemon's embedded one, which may still be starting."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        client = _client(settings)
        try:
            await client.__aenter__()
            break
        except aiomqtt.MqttError:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.2)
    try:
        yield client
    finally:
        await client.__aexit__(None, None, None)


async def _wait_for_a_host(client: aiomqtt.Client, prefix: str, within: float) -> None:
    """Return once some labd host is online (retained status): a submission published with
    no daemon subscribed would be dropped by the broker."""
    topic = f"{prefix}/hosts/+/status"
    await client.subscribe(topic, qos=1)
    try:
        async with asyncio.timeout(within):
            async for message in client.messages:
                if json.loads(message.payload).get("status") == "online":
                    break
    except TimeoutError:
        raise LabdError(
            f"no labd host is online on {prefix} within {within:g} s (is `labd run` running?)"
        ) from None
    finally:
        await client.unsubscribe(topic)


async def job_state(settings: Settings, job_id: str) -> dict[str, Any]:
    """The job's retained state, as the daemon last published it."""
    topic = f"{_prefix(settings)}/jobs/{job_id}/state"
    try:
        async with _connected(settings, 3) as client:
            await client.subscribe(topic, qos=1)
            async with asyncio.timeout(3):
                async for message in client.messages:
                    return dict(json.loads(message.payload))
    except TimeoutError:
        raise UsageError(f"no job {job_id!r} has a state on {topic}") from None
    except aiomqtt.MqttError as e:
        raise LabdError(f"cannot reach the MQTT broker: {e}") from e
    raise UsageError(f"no job {job_id!r}")


async def cancel(settings: Settings, job_id: str) -> None:
    try:
        async with _connected(settings, 3) as client:
            await client.publish(f"{_prefix(settings)}/jobs/{job_id}/cancel", b"", qos=1)
    except aiomqtt.MqttError as e:
        raise LabdError(f"cannot reach the MQTT broker: {e}") from e


async def query(settings: Settings, request: dict[str, Any], within: float = 10) -> dict[str, Any]:
    """Ask a labd host over MQTT (list, show, results); the answer's data, as the local API's."""
    prefix = _prefix(settings)
    reply_to = f"{prefix}/answers/{uuid.uuid4().hex}"
    try:
        async with _connected(settings, within) as client:
            await _wait_for_a_host(client, prefix, within)
            await client.subscribe(reply_to, qos=1)
            body = {"schema_version": 1, "reply_to": reply_to, **request}
            await client.publish(f"{prefix}/jobs/query", json.dumps(body), qos=1)
            async with asyncio.timeout(within):
                async for message in client.messages:
                    if message.topic.value == reply_to:
                        answer = json.loads(message.payload)
                        break
    except TimeoutError:
        raise LabdError(f"no answer from labd on {prefix} within {within:g} s") from None
    except aiomqtt.MqttError as e:
        raise LabdError(f"cannot reach the MQTT broker: {e}") from e
    if not answer["ok"]:
        raise UsageError("\n".join(answer["problems"]))
    return dict(answer["data"])

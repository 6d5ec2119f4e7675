"""How labd meets its broker: the MQTT client built from the settings (TLS, a persistent
session, a last will), the broker credentials, the client id, and the bytes of a message."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import ssl
from pathlib import Path
from urllib.parse import unquote, urlsplit

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from labd.config import MqttSettings
from labd.mqtt.messages import Message
from labd.mqtt.topics import topic_problem
from labd.stats import json_text


def broker_client(
    s: MqttSettings,
    address: tuple[str, int],
    client_id: str,
    protocol: aiomqtt.ProtocolVersion,
    credentials: tuple[str, str],
    will: aiomqtt.Will,
    inbox: type[asyncio.Queue[aiomqtt.Message]] | None = None,
) -> aiomqtt.Client:
    """A client of the broker at `address` that keeps its session across reconnects."""
    properties = None
    if protocol == aiomqtt.ProtocolVersion.V5:
        # MQTT 5 ends a session at disconnect unless told otherwise: keep ours, so QoS 1
        # requests published while labd restarts or reconnects wait for it at the broker.
        properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        properties.SessionExpiryInterval = s.session_expiry_s
    username, password = credentials
    return aiomqtt.Client(
        address[0],
        address[1],
        username=username or None,
        password=password or None,
        properties=properties,
        identifier=client_id,
        protocol=protocol,
        will=will,
        keepalive=s.keepalive_s,
        tls_params=_tls(s),
        timeout=10,
        queue_type=inbox,  # incoming messages: bounded (labd.mqtt.flood)
        # Small messages go out at once: with Nagle's algorithm an answer queued behind
        # unacknowledged events waits for the peer's delayed ACK (40 ms on Linux).
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
        # Our subscriptions and unacknowledged QoS 1 messages survive a reconnect.
        clean_session=False if protocol == aiomqtt.ProtocolVersion.V311 else None,
        clean_start=False if protocol == aiomqtt.ProtocolVersion.V5 else 3,
    )


def _tls(s: MqttSettings) -> aiomqtt.TLSParameters | None:
    if urlsplit(s.url).scheme == "mqtts" or s.tls_ca or s.tls_cert:
        return aiomqtt.TLSParameters(
            ca_certs=s.tls_ca or None,
            certfile=s.tls_cert or None,
            keyfile=s.tls_key or None,
            cert_reqs=ssl.CERT_REQUIRED,
        )
    return None


async def admits_anonymous(
    s: MqttSettings, address: tuple[str, int], protocol: aiomqtt.ProtocolVersion
) -> bool:
    """Whether the broker lets in a client with no user name: a probe that connects and
    leaves at once (a clean session, so the broker keeps nothing of it). False also when the
    probe could not tell (the broker gone meanwhile)."""
    probe = aiomqtt.Client(
        address[0],
        address[1],
        identifier=f"labd-probe-{secrets.token_hex(8)}",
        protocol=protocol,
        tls_params=_tls(s),
        timeout=5,
    )
    try:
        async with probe:
            return True
    except aiomqtt.MqttError:
        return False


async def publish(
    client: aiomqtt.Client,
    topic: str,
    payload: bytes,
    retain: bool = False,
    properties: Properties | None = None,
) -> None:
    """Publish with QoS 1; ValueError, and nothing sent, when the topic cannot be valid: the
    client library lets a NUL or a non-character through, and Mosquitto answers such a
    publish by dropping labd's connection."""
    if problem := topic_problem(topic):
        raise ValueError(f"not published: topic {ascii(topic)[:200]} {problem}")
    await client.publish(topic, payload, 1, retain, properties=properties)


def encode(message: Message) -> bytes:
    """A message as JSON bytes. ASCII-escaped: a lone surrogate or other odd text that got
    into a value can never make the payload unencodable."""
    return json_bytes(message.model_dump(mode="json"))


def json_bytes(data: object) -> bytes:
    """Strict JSON: a NaN or infinity (an older stored record's) goes out as null, never as
    the bare NaN strict parsers reject."""
    return json_text(data, ensure_ascii=True, separators=(",", ":")).encode()


def broker_credentials(settings: MqttSettings) -> tuple[str, str]:
    """(username, password) for the broker: mqtt.username/password, else those written in
    mqtt.url (mqtt://user:password@host), URL-decoded."""
    parts = urlsplit(settings.url)
    username = settings.username or unquote(parts.username or "")
    password = settings.password or unquote(parts.password or "")
    return username, password


def default_client_id(lab: str, host: str, state_dir: Path) -> str:
    """labd-<lab>-<host>-<16 hex made once per state directory>: stable across restarts (the
    broker keeps the session by it) and not guessable from anything labd publishes."""
    path = state_dir / "mqtt-client-id"
    try:
        suffix = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        suffix = secrets.token_hex(8)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(suffix + "\n")
    return f"labd-{lab}-{host}-{suffix}"

"""An MQTT request on its way through `inbound`: the route it takes, the request whose
signature held, the refusal and the replies, and how untrusted text is shown."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from labd.auth import Action, Principal, Signed
from labd.mqtt.messages import Message, Request
from labd.mqtt.topics import Topics


@dataclass(frozen=True)
class Reply:
    topic: str
    message: Message
    correlation: bytes | None = None  # echoed on an MQTT 5 response topic


class Refused(Exception):
    """A request labd will not act on: `reason` is the short code, `problems` the detail."""

    def __init__(
        self, problems: list[str], reason: str = "invalid", job_free: bool = False
    ) -> None:
        super().__init__("; ".join(problems))
        self.problems, self.reason = problems, reason
        self.job_free = job_free  # a submission refused for an id no job has


@dataclass(frozen=True)
class Incoming:
    """One request whose signature held, on its way to its handler."""

    topic: str
    request: Any  # the route's Request model (an Envelope for a request refused unread)
    signed: Signed
    response_topic: str
    correlation: bytes | None

    @property
    def principal(self) -> Principal:
        return self.signed.principal


@dataclass(frozen=True)
class Envelope:
    """The answering fields of a signed request refused before it was read whole (its
    principal may not do it, or a field is wrong): enough to answer that principal on its own
    reply topic. A field is kept only where it keeps its own rules, else left empty."""

    reply_to: str = ""
    correlation: str = ""
    id: str = ""  # a submission's job id
    id_given: bool = False  # an id was sent, valid or not: a refusal makes up none for it
    query: str = ""  # a query's kind
    source: str = ""


Handler = Callable[[Incoming], Awaitable[list[Reply]]]


@dataclass(frozen=True)
class Route:
    filter: str
    model: type[Request]
    action: Action
    handler: Handler


def replayed(topic: str) -> Refused:
    return Refused(
        [f"{topic}: replayed: a message with this nonce was already handled"], "replayed"
    )


def answers(incoming: Incoming, answer: Message) -> list[Reply]:
    """The answer on the request's reply_to and on its MQTT 5 response topic, if any (both
    were checked to lie under the principal's own replies)."""
    topics = {incoming.request.reply_to, incoming.response_topic} - {""}
    return [Reply(t, answer, incoming.correlation) for t in sorted(topics)]


def id_from_nonce(principal: str, nonce: str) -> str:
    return hashlib.sha256(f"{principal}\n{nonce}".encode()).hexdigest()[:32]


def claimed_principal(data: dict[str, Any]) -> str:
    auth = data.get("auth")
    name = auth.get("principal") if isinstance(auth, dict) else None
    return shown(name) if isinstance(name, str) else ""


def target_of(topic: str, topics: Topics) -> str:
    return topic[len(topics.prefix) + 1 :] if topic.startswith(topics.prefix + "/") else topic


def shown(text: str, limit: int = 128) -> str:
    """Untrusted text fit for a log line, a JSON answer and a terminal: printable ASCII as is,
    anything else (NUL, lone surrogates) escaped, and long text cut."""
    safe = text if text.isascii() and text.isprintable() else ascii(text)[1:-1]
    return safe if len(safe) <= limit else safe[:limit] + "..."


def safe(problem: str) -> str:
    return shown(problem, limit=1000)

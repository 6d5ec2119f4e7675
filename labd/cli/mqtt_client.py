"""The `labd` command as an MQTT client of a running daemon: submit and follow, show, cancel.

It reaches the broker the daemon uses (mqtt.url, else the embedded address), talks the same
topics a CI system does, and signs every request with the credentials it finds (see
labd.auth.credentials), so what it shows is what CI sees. Answers come on this principal's own
reply topic and are matched by topic and correlation; nothing else that arrives is mistaken
for them.
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

from labd.auth import (
    Credentials,
    ensure_local_credentials,
    find_credentials,
    replies_prefix,
    sign,
)
from labd.config import Settings
from labd.errors import LabdError, UsageError
from labd.model import TERMINAL

SCHEMA_VERSION = 2  # of the requests labd takes


def credentials_for(settings: Settings) -> Credentials:
    """The credentials to sign with. On the daemon's own account they are the local admin's,
    made here first when this command runs before the daemon ever has (same file, same
    race-free creation)."""
    found = find_credentials(settings.daemon.state_path)
    if found is None and settings.auth.local_credentials:
        with contextlib.suppress(OSError):
            found = ensure_local_credentials(settings.daemon.state_path)
    if found is None:
        raise UsageError(
            "no labd credentials: set LABD_CREDENTIALS to a credentials file, put one at "
            "~/.config/labd/credentials.toml (an admin makes it with `labd auth add`), or run "
            "this as the account that runs `labd run`"
        )
    return found


# Refusals of a request whose signature a host could not verify (they come on <prefix>/errors
# only), and how long another host of the lab then has to answer it on our reply topic.
CREDENTIALS_REFUSED = ("bad_signature", "unknown_key", "unknown_principal")
ANOTHER_HOST_S = 2.0


def _prefix(settings: Settings) -> str:
    return settings.mqtt.prefix or f"labd/v1/{settings.daemon.lab}"


def refusal_error(answer: dict[str, Any]) -> LabdError:
    """labd's refusal as the error to raise: a runtime failure (exit 3) when labd could not do
    it now (`unavailable`: its database away or its disk full, as the API says it), else the
    request's own fault (exit 2)."""
    problems = "\n".join(answer.get("problems") or ["refused"])
    return LabdError(problems) if answer.get("reason") == "unavailable" else UsageError(problems)


class Session:
    """A connected, signing client with a reply topic of its own."""

    def __init__(self, settings: Settings, creds: Credentials) -> None:
        self.settings, self.creds = settings, creds
        self.prefix = _prefix(settings)
        self.replies = f"{replies_prefix(self.prefix, creds.principal)}/{uuid.uuid4().hex}"
        self.client = _client(settings, creds)
        self.unverified: UsageError | None = None  # a host's refusal of our credentials

    def signed(self, topic: str, body: dict[str, Any]) -> tuple[str, bytes, str]:
        """(topic, payload, correlation) of a request, signed, answered on our reply topic."""
        correlation = uuid.uuid4().hex
        message = {
            "schema_version": SCHEMA_VERSION,
            "reply_to": self.replies,
            "correlation": correlation,
            **body,
        }
        creds = self.creds
        payload = sign(message, topic, creds.principal, creds.key_id, creds.key)
        return topic, json.dumps(payload).encode(), correlation

    async def messages(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(topic, JSON object) of every message; anything else that arrives is skipped."""
        async for message in self.client.messages:
            try:
                body = json.loads(message.payload)  # type: ignore[arg-type,unused-ignore]
            except (TypeError, ValueError):
                continue
            if isinstance(body, dict):
                yield message.topic.value, body

    def is_answer(self, topic: str, body: dict[str, Any], correlation: str) -> bool:
        return topic == self.replies and body.get("correlation") == correlation

    @property
    def errors(self) -> str:
        return f"{self.prefix}/errors"

    async def listen(self, *topics: str) -> None:
        for topic in (self.replies, self.errors, *topics):
            await self.client.subscribe(topic, qos=1)

    def refusal(
        self, topic: str, body: dict[str, Any], correlation: str, timer: asyncio.Timeout
    ) -> LabdError | None:
        """labd's refusal of our request on <prefix>/errors (a request whose signature did
        not hold is answered only there), as the error to raise. A host that could not verify
        the signature may not be the only one: each host of a lab has its own `local` key, and
        the host whose key it is answers on our reply topic. Such a refusal is kept in
        `unverified`, and the wait shortened to ANOTHER_HOST_S for that answer to come."""
        if topic != self.errors or body.get("correlation") != correlation:
            return None
        problems = "\n".join(body.get("problems") or ["refused"])
        if body.get("reason") not in CREDENTIALS_REFUSED:
            return refusal_error(body)
        where = self.creds.path or "the credentials file"
        self.unverified = UsageError(
            f"{problems}\n(signed as {self.creds.principal!r} with {where}: labd does not know "
            "these credentials; run as the account that runs `labd run`, or set LABD_CREDENTIALS)"
        )
        deadline = asyncio.get_running_loop().time() + ANOTHER_HOST_S
        if (when := timer.when()) is None or when > deadline:
            timer.reschedule(deadline)
        return None


def _client(settings: Settings, creds: Credentials) -> aiomqtt.Client:
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
        username=creds.broker_username,
        password=creds.broker_password,
        identifier=f"labd-cli-{uuid.uuid4().hex[:8]}",
        tls_params=tls,
        timeout=10,
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )


@contextlib.asynccontextmanager
async def _connected(settings: Settings, within: float) -> AsyncIterator[Session]:
    """A connected session, trying for `within` seconds: on a bare machine the broker is the
    daemon's embedded one, which may still be starting (and writing our credentials)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            session = Session(settings, credentials_for(settings))
            await session.client.__aenter__()
            break
        except (aiomqtt.MqttError, UsageError):
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(0.2)
    try:
        yield session
    finally:
        with contextlib.suppress(aiomqtt.MqttError):
            await session.client.__aexit__(None, None, None)


async def _wait_for_a_host(session: Session, within: float) -> int | None:
    """Return once some labd host is online (retained status): a request published with no
    daemon subscribed would be dropped by the broker. Its payload limit, when it says it (an
    older labd does not)."""
    topic = f"{session.prefix}/hosts/+/status"
    await session.client.subscribe(topic, qos=1)
    try:
        async with asyncio.timeout(within):
            async for found, body in session.messages():
                if aiomqtt.Topic(found).matches(topic) and body.get("status") in (
                    "online",
                    "degraded",
                ):
                    limit = body.get("max_payload_bytes")
                    return limit if type(limit) is int and limit > 0 else None
    except TimeoutError:
        raise LabdError(
            f"no labd host is online on {session.prefix} within {within:g} s "
            "(is `labd run` running?)"
        ) from None
    finally:
        await session.client.unsubscribe(topic)
    return None  # the broker closed the connection


def _mqtt_failure(e: aiomqtt.MqttError) -> LabdError:
    text = str(e)
    if "ot authorized" in text or "bad user name or password" in text.lower():
        return UsageError(f"the MQTT broker refused these credentials: {text}")
    return LabdError(
        f"cannot reach the MQTT broker: {text} (is `labd run` running? and the broker it "
        "uses? `--via api` asks labd's own API instead)"
    )


ENDED = {state.value for state in TERMINAL}


def _within_limit(payload: bytes, limit: int) -> None:
    """UsageError for a request labd would refuse unread: over its payload limit nothing says
    whom to answer, and the CLI said labd was not running."""
    if len(payload) > limit:
        raise UsageError(
            f"the request is {len(payload):,} bytes, over the {limit:,} labd takes over MQTT "
            "([mqtt] max_payload_bytes): it would be refused unread, without an answer; make "
            "the manifest's params smaller"
        )


async def submit_and_follow(
    settings: Settings,
    spec: dict[str, Any],
    job_id: str,
    source: str,
    wait: bool,
    answer_within: float,
    on_event: Callable[[dict[str, Any]], None] = lambda _: None,
    on_answer: Callable[[dict[str, Any]], None] = lambda _: None,
) -> dict[str, Any]:
    """Submit; return {"job_id", "events", "result", "duplicate", "state"} once answered
    (or, with wait, finished). The id of a job this principal submitted already with this spec
    is harmless: "duplicate" is then true, "state" its state when answered, and with wait it
    is followed from then to its end (its results are the caller's to ask for).

    UsageError when labd refuses it."""
    job_id = job_id or uuid.uuid4().hex
    events: list[dict[str, Any]] = []
    seen: set[str] = set()
    result: dict[str, Any] | None = None
    answer: dict[str, Any] | None = None
    session: Session | None = None
    try:
        async with _connected(settings, answer_within) as session:
            prefix = session.prefix
            limit = await _wait_for_a_host(session, answer_within)
            events_topic = f"{prefix}/jobs/{job_id}/events"
            results_topic = f"{prefix}/results/{spec['suite']}/{spec['test']}"
            await session.listen(events_topic, results_topic)
            request = {"id": job_id, "source": source, "spec": spec}
            topic, payload, correlation = session.signed(f"{prefix}/jobs/submit", request)
            # The lab's own limit where it says it: this machine's configuration may not be
            # the lab's (a CI runner's has the default).
            _within_limit(payload, limit or settings.mqtt.max_payload_bytes)
            await session.client.publish(topic, payload, qos=1)
            async with asyncio.timeout(answer_within) as timer:
                async for found, body in session.messages():
                    refused = answer is None and session.refusal(found, body, correlation, timer)
                    if refused:
                        raise refused
                    if answer is None and session.is_answer(found, body, correlation):
                        answer = body  # the first only: a copy replayed later says nothing
                        timer.reschedule(None)  # the daemon answered: no time limit now
                        on_answer(body)
                        over = body.get("state") in ENDED  # a duplicate that has ended
                        if not body.get("accepted") or not wait or over:
                            break
                    elif found == results_topic and body.get("job_id") == job_id:
                        result = body
                    elif found == events_topic and body.get("event_id") not in seen:
                        seen.add(body["event_id"])  # at-least-once: drop duplicates
                        events.append(body)
                        on_event(body)
                    # With --wait: the end and its result (published right after "finished");
                    # a duplicate's result is asked for afterwards.
                    ended = bool(events) and events[-1].get("kind") == "finished"
                    if ended and (result or (answer or {}).get("duplicate")):
                        break
    except TimeoutError:
        if session is not None and session.unverified is not None and answer is None:
            raise session.unverified from None  # no host knew our credentials
        # The request stands at the broker: labd leaves it while its database is away and
        # takes the request when it returns. The id makes a second try harmless.
        raise LabdError(
            f"no answer from labd on {_prefix(settings)} within {answer_within:g} s (is `labd "
            "run` running? a request over the lab's own [mqtt] max_payload_bytes is refused "
            f"unread, without an answer); the request may still be carried out as job {job_id} "
            f"when labd returns: see `labd jobs show {job_id}`, or submit again with "
            f"`--id {job_id}`, which cannot make a second job"
        ) from None
    except aiomqtt.MqttError as e:
        raise _mqtt_failure(e) from e
    if answer is not None and not answer.get("accepted"):
        raise refusal_error(answer)
    duplicate = bool(answer and answer.get("duplicate"))
    state = events[-1]["state"] if events else (answer or {}).get("state", "")
    return {
        "job_id": job_id,
        "events": events,
        "result": result,
        "duplicate": duplicate,
        "state": state,
    }


async def job_state(settings: Settings, job_id: str) -> dict[str, Any]:
    """The job's retained state, as the daemon last published it."""
    topic = f"{_prefix(settings)}/jobs/{job_id}/state"
    try:
        async with _connected(settings, 3) as session:
            await session.client.subscribe(topic, qos=1)
            async with asyncio.timeout(3):
                async for found, body in session.messages():
                    if found == topic:
                        return body
    except TimeoutError:
        raise UsageError(f"no job {job_id!r} has a state on {topic}") from None
    except aiomqtt.MqttError as e:
        raise _mqtt_failure(e) from e
    raise UsageError(f"no job {job_id!r}")


async def _ask(settings: Settings, suffix: str, body: dict[str, Any], within: float) -> Any:
    """Publish a signed request on <prefix>/<suffix>; its answer."""
    session: Session | None = None
    try:
        async with _connected(settings, within) as session:
            await _wait_for_a_host(session, within)
            await session.listen()
            topic, payload, correlation = session.signed(f"{session.prefix}/{suffix}", body)
            await session.client.publish(topic, payload, qos=1)
            async with asyncio.timeout(within) as timer:
                async for found, answer in session.messages():
                    if refused := session.refusal(found, answer, correlation, timer):
                        raise refused
                    if session.is_answer(found, answer, correlation):
                        return answer
    except TimeoutError:
        if session is not None and session.unverified is not None:
            raise session.unverified from None  # no host knew our credentials
        raise LabdError(f"no answer from labd on {_prefix(settings)} within {within:g} s") from None
    except aiomqtt.MqttError as e:
        raise _mqtt_failure(e) from e
    raise LabdError("the broker closed the connection before labd answered")


async def cancel(settings: Settings, job_id: str, within: float = 10) -> None:
    answer = await _ask(settings, f"jobs/{job_id}/cancel", {}, within)
    if not answer.get("ok"):
        raise refusal_error(answer)


async def command(settings: Settings, device_id: str, action: str, within: float = 10) -> None:
    answer = await _ask(settings, f"devices/{device_id}/command", {"action": action}, within)
    if not answer.get("ok"):
        raise refusal_error(answer)


async def query(settings: Settings, request: dict[str, Any], within: float = 10) -> dict[str, Any]:
    """Ask a labd host over MQTT (list, show, results); the answer's data, as the local API's."""
    answer = await _ask(settings, "jobs/query", request, within)
    if not answer.get("ok"):
        raise refusal_error(answer)
    return dict(answer.get("data") or {})

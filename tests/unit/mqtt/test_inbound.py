"""Who may do what over MQTT, without a broker: signatures, roles, replays, reply topics,
rate limits and hostile text, through the real inbound handler and a real SQLite store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from labd.auth import (
    Audit,
    Credentials,
    Principals,
    RateLimiter,
    new_credentials,
    sign,
)
from labd.auth.principals import Principal, Role
from labd.cli.mqtt_client import refusal_error
from labd.config import AuthSettings, MqttSettings
from labd.errors import EXIT_RUNTIME, EXIT_USAGE
from labd.mqtt import Inbound, Topics
from labd.mqtt.client import encode
from labd.mqtt.messages import ErrorMessage, QueryAnswer, RequestAnswer, SubmitAnswer
from labd.mqtt.requests import Reply
from labd.store import Store
from tests.integration.scheduler.test_scheduler import Lab, make_lab

TOPICS = Topics("labd/v1/t")
CI, OTHER, OPS, DASH = (new_credentials(n) for n in ("ci", "other", "ops", "dash"))
ROLES = {CI: Role.SUBMITTER, OTHER: Role.SUBMITTER, OPS: Role.ADMIN, DASH: Role.VIEWER}
SPEC = {"suite": "s", "test": "t", "scenario": "script", "device": {"platform": "scripted"}}


def principal(creds: Credentials, role: Role, **more: Any) -> Principal:
    return Principal(creds.principal, role, keys={creds.key_id: creds.key}, **more)


@dataclass
class Harness:
    lab: Lab
    inbound: Inbound
    now: list[float]

    async def send(
        self, topic: str, body: dict[str, Any], creds: Credentials | None = CI, **auth: Any
    ) -> list[Reply]:
        return await self.inbound.handle(topic, payload(topic, body, creds, **auth))

    async def raw(self, topic: str, data: bytes) -> list[Reply]:
        return await self.inbound.handle(topic, data)


def payload(topic: str, body: dict[str, Any], creds: Credentials | None, **auth: Any) -> bytes:
    message = {"schema_version": 2, **body}
    if creds is not None:
        message = sign(message, topic, creds.principal, creds.key_id, creds.key, **auth)
    return json.dumps(message).encode()


def replies_to(creds: Credentials) -> str:
    return f"{TOPICS.prefix}/replies/{creds.principal}/x"


def error(replies: list[Reply]) -> ErrorMessage:
    (found,) = [r.message for r in replies if r.topic == TOPICS.errors]
    assert isinstance(found, ErrorMessage)
    return found


def answer(replies: list[Reply], creds: Credentials = CI) -> Any:
    (found,) = [r.message for r in replies if r.topic == replies_to(creds)]
    return found


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'db'}")
    lab = await make_lab(store, tmp_path, ["d1"])
    now = [0.0]
    principals = Principals(
        [principal(c, r, submits_per_minute=3 if c is CI else 120) for c, r in ROLES.items()]
    )
    inbound = Inbound(
        MqttSettings(),
        AuthSettings(),
        TOPICS,
        principals,
        lab.jobs,
        lab.scheduler,
        lab.pool,
        Audit(lab.bus),
    )
    lab.jobs.limiter = RateLimiter(clock=lambda: now[0])
    try:
        yield Harness(lab, inbound, now)
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
        lab._recorder.cancel()  # type: ignore[attr-defined]
        await store.close()


async def test_unsigned_and_forged_messages_do_nothing(harness: Harness) -> None:
    body = {"id": "j1", "reply_to": replies_to(CI), "spec": SPEC}
    assert error(await harness.send(TOPICS.submit, body, None)).reason == "unsigned"
    stranger = new_credentials("ci", key_id="k9")  # right name, a key it does not have
    refused = error(await harness.send(TOPICS.submit, body, stranger))
    assert refused.reason == "unknown_key"
    forged = Credentials(**{**CI.__dict__, "secret_key": stranger.secret_key})  # wrong secret
    assert error(await harness.send(TOPICS.submit, body, forged)).reason == "bad_signature"
    nobody = new_credentials("mallory")
    assert error(await harness.send(TOPICS.submit, body, nobody)).reason == "unknown_principal"
    # A signed message altered on the way: the signature no longer holds.
    data = json.loads(payload(TOPICS.submit, body, CI))
    data["spec"]["priority"] = 100
    refused = error(await harness.raw(TOPICS.submit, json.dumps(data).encode()))
    assert refused.reason == "bad_signature"
    assert await harness.lab.store.get_job("j1") is None


async def test_identity_never_comes_from_the_payload(harness: Harness) -> None:
    body = {"id": "j1", "sender": "ops", "spec": SPEC}
    refused = error(await harness.send(TOPICS.submit, body, CI))
    assert refused.reason == "invalid" and "sender: unknown key" in refused.problems[0]
    await harness.send(TOPICS.submit, {"id": "j2", "spec": SPEC}, CI)
    job = await harness.lab.store.get_job("j2")
    assert job is not None and job.submitter == "ci"


async def test_stale_future_and_replayed_messages_are_refused(harness: Harness) -> None:
    import time

    body = {"id": "j1", "spec": SPEC}
    stale = await harness.send(TOPICS.submit, body, CI, now=time.time() - 3600)
    assert error(stale).reason == "expired"
    future = await harness.send(TOPICS.submit, body, CI, now=time.time() + 3600)
    assert error(future).reason == "future"
    original = payload(TOPICS.submit, {"id": "j1", "spec": SPEC}, CI)
    assert not [r for r in await harness.raw(TOPICS.submit, original) if r.topic == TOPICS.errors]
    refused = error(await harness.raw(TOPICS.submit, original))
    assert refused.reason == "replayed"
    # Signed for one topic, replayed onto another: the topic is part of what is signed.
    cancel_a = payload(f"{TOPICS.prefix}/jobs/j1/cancel", {}, CI)
    refused = error(await harness.raw(f"{TOPICS.prefix}/jobs/j9/cancel", cancel_a))
    assert refused.reason == "bad_signature"


async def test_roles_decide_who_may_submit_cancel_and_administer(harness: Harness) -> None:
    replies = await harness.send(TOPICS.submit, {"id": "v1", "spec": SPEC}, DASH)
    assert error(replies).reason == "forbidden"
    await harness.send(TOPICS.submit, {"id": "mine", "spec": {**SPEC, "priority": -5}}, CI)
    cancel = f"{TOPICS.prefix}/jobs/mine/cancel"
    refused = error(await harness.send(cancel, {"reply_to": replies_to(OTHER)}, OTHER))
    assert refused.reason == "forbidden" and "may not cancel job 'mine' of 'ci'" in str(refused)
    job = await harness.lab.store.get_job("mine")
    assert job is not None and not job.cancel_requested
    command = f"{TOPICS.prefix}/devices/d1/command"
    assert error(await harness.send(command, {"action": "drain"}, CI)).reason == "forbidden"
    ok = answer(
        await harness.send(command, {"action": "drain", "reply_to": replies_to(OPS)}, OPS), OPS
    )
    assert isinstance(ok, RequestAnswer) and ok.ok
    ok = answer(await harness.send(cancel, {"reply_to": replies_to(OPS)}, OPS), OPS)
    assert isinstance(ok, RequestAnswer) and ok.ok


async def test_answers_go_only_to_the_askers_own_topic_with_secrets_redacted(
    harness: Harness,
) -> None:
    spec = {**SPEC, "params": {"env": {"API_TOKEN": "hunter2"}}}
    await harness.send(TOPICS.submit, {"id": "s1", "spec": spec}, CI)
    query = {"query": "show", "job_id": "s1", "reply_to": f"{TOPICS.prefix}/alerts"}
    refused = error(await harness.send(TOPICS.query, query, DASH))
    assert refused.reason == "forbidden" and "reply_to must lie under" in refused.problems[0]
    query["reply_to"] = replies_to(DASH)
    replies = await harness.send(TOPICS.query, query, DASH)
    assert [r.topic for r in replies] == [replies_to(DASH)]
    shown = answer(replies, DASH)
    assert isinstance(shown, QueryAnswer) and shown.ok
    assert "hunter2" not in encode(shown).decode()
    assert shown.data["job"]["spec"]["params"]["env"] == {"API_TOKEN": "**********"}


async def test_rate_limit_is_per_authenticated_principal(harness: Harness) -> None:
    async def submit(creds: Credentials, n: int) -> Any:
        body = {"id": f"{creds.principal}-{n}", "reply_to": replies_to(creds), "spec": SPEC}
        replies = await harness.send(TOPICS.submit, body, creds)
        return answer(replies, creds)

    for n in range(3):
        assert (await submit(CI, n)).accepted
    refused = await submit(CI, 3)
    assert isinstance(refused, SubmitAnswer) and not refused.accepted
    assert "made 3 submissions in the last minute (limit 3)" in refused.problems[0]
    assert (await submit(OTHER, 0)).accepted  # another principal has its own budget
    harness.now[0] = 61.0
    assert (await submit(CI, 4)).accepted  # the window moved on


async def test_a_quota_refusal_says_so_and_every_submission_counts_toward_the_rate(
    harness: Harness,
) -> None:
    """A quota refusal's reason was invalid_spec; and the rate's refusal said "submitted 3
    jobs" when 2 had been accepted: every submission counts (a flood of bad ones too), and the
    refusal now says submissions."""
    harness.lab.scheduler.stop_taking_work()  # what is accepted stays queued, in the quota
    quota = [principal(CI, Role.SUBMITTER, submits_per_minute=10, max_active_jobs=2)]
    harness.inbound.principals = Principals(quota)

    async def submit(n: int, spec: dict[str, Any] = SPEC) -> list[Reply]:
        body = {"id": f"q{n}", "reply_to": replies_to(CI), "spec": spec}
        return await harness.send(TOPICS.submit, body, CI)

    assert error(await submit(0, {**SPEC, "scenario": "nope"})).reason == "invalid_spec"
    assert answer(await submit(1)).accepted and answer(await submit(2)).accepted
    replies = await submit(3)
    refused = error(replies)
    assert refused.reason == "quota_exceeded", refused
    assert "quota: principal 'ci' has 2 jobs queued or running (limit 2)" in str(refused)
    (rejected,) = [r.message for r in replies if r.topic == TOPICS.job_events("q3")]
    assert rejected.data["reason"] == "quota_exceeded"  # type: ignore[attr-defined]
    harness.inbound.principals = Principals([principal(CI, Role.SUBMITTER, submits_per_minute=5)])
    assert answer(await submit(4)).accepted  # the fifth submission of the minute
    refused = error(await submit(5))
    assert refused.reason == "rate_limited"
    assert "made 5 submissions in the last minute (limit 5)" in refused.problems[0]


@pytest.mark.parametrize(
    ("sent", "reason", "shown"),
    [(1e300, "future", "1e+300 s in the future"), (-1e300, "expired", "1e+300 s old")],
)
async def test_an_absurd_time_is_refused_in_a_line_of_sane_length(
    harness: Harness, sent: float, reason: str, shown: str
) -> None:
    replies = await harness.send(TOPICS.submit, {"id": "t1", "spec": SPEC}, CI, now=sent)
    refused = error(replies)
    assert refused.reason == reason and shown in refused.problems[0], refused
    assert len(refused.problems[0]) < 120  # not a number of 301 digits


async def test_an_unrepresentable_time_is_malformed(harness: Harness) -> None:
    fake = {"principal": "ci", "key_id": CI.key_id, "nonce": "abcdefgh", "signature": "x"}
    for sent in (b"1" + b"0" * 400, b"NaN", b"Infinity"):
        auth = json.dumps({**fake, "time": 0}).replace("0}", sent.decode() + "}")
        data = b'{"schema_version": 2, "spec": {}, "auth": ' + auth.encode() + b"}"
        refused = error(await harness.raw(TOPICS.submit, data))
        assert refused.reason == "malformed", (sent, refused)
        assert refused.problems == [f"{TOPICS.submit}: auth.time is out of range (Unix seconds)"]


@pytest.mark.parametrize("query", ["show", "results", "perfherder"])
async def test_a_query_for_one_job_needs_its_id(harness: Harness, query: str) -> None:
    """Refused on the reply topic and, as every refused input, on <prefix>/errors (a tester
    found this one on the reply topic only)."""
    body = {"query": query, "reply_to": replies_to(DASH)}
    replies = await harness.send(TOPICS.query, body, DASH)
    shown = answer(replies, DASH)
    assert isinstance(shown, QueryAnswer) and not shown.ok
    assert shown.problems == [f"{TOPICS.query}: job_id: required for a {query} query"]
    assert error(replies).problems == shown.problems


async def test_a_perfherder_query_for_a_job_that_did_not_succeed_names_its_state(
    harness: Harness,
) -> None:
    """The daemon's own export (`labd jobs results ID --format perfherder --via mqtt`): a
    queued, failed or cancelled job's figures would join the series as good ones."""
    await harness.send(TOPICS.submit, {"id": "j9", "spec": SPEC}, CI)
    body = {"query": "perfherder", "job_id": "j9", "reply_to": replies_to(DASH)}
    shown = answer(await harness.send(TOPICS.query, body, DASH), DASH)
    assert isinstance(shown, QueryAnswer) and not shown.ok and shown.data == {}
    assert shown.problems == [
        f"{TOPICS.query}: job 'j9' is queued: only a succeeded job is exported to Perfherder "
        "(its raw values: --format csv or json)"
    ]
    assert shown.reason == "invalid"


async def test_a_query_for_an_unknown_job_says_not_found(harness: Harness) -> None:
    """As a cancel of one does: a client tells "no such job" from other failures by code."""
    body = {"query": "show", "job_id": "nope-nope", "reply_to": replies_to(DASH)}
    shown = answer(await harness.send(TOPICS.query, body, DASH), DASH)
    assert isinstance(shown, QueryAnswer) and not shown.ok
    assert (shown.reason, shown.problems) == ("not_found", [f"{TOPICS.query}: no job 'nope-nope'"])


@pytest.mark.parametrize(
    "job_id", ["build#123", "a+b", "a/b", "\ud800", "x\x00y", "-rf", "..", "x" * 10_000]
)
async def test_hostile_ids_are_refused_with_the_rule_and_answers_stay_publishable(
    harness: Harness, job_id: str
) -> None:
    body = {"id": job_id, "spec": SPEC, "reply_to": replies_to(CI)}
    try:
        replies = await harness.send(TOPICS.submit, body, CI)
    except Exception:  # no JSON canonical form (a lone surrogate): forge the auth member
        fake = {"principal": "ci", "key_id": "k1", "time": 1.0, "nonce": "abcdefgh"}
        data = {"schema_version": 2, **body, "auth": {**fake, "signature": "x"}}
        replies = await harness.raw(TOPICS.submit, json.dumps(data).encode())
        assert error(replies).reason == "malformed"
    else:
        refused = error(replies)
        assert refused.reason == "invalid" and "id:" in refused.problems[0]
        # The reply names no job: not the invalid id, nor one made up from the nonce (a
        # client matching replies by job_id saw an id it never used).
        assert answer(replies).job_id == ""
    for reply in replies:  # every answer encodes, whatever the input held
        encode(reply.message)
        reply.topic.encode()
        assert "#" not in reply.topic and "+" not in reply.topic


async def test_a_lone_surrogate_as_principal_is_refused_and_reported_safely(
    harness: Harness,
) -> None:
    message = {
        "schema_version": 2,
        "spec": SPEC,
        "auth": {
            "principal": "\ud800\x00",
            "key_id": "k",
            "time": 1.0,
            "nonce": "abcdefgh",
            "signature": "x",
        },
    }
    data = json.dumps(message).encode()
    replies = await harness.raw(TOPICS.submit, data)
    refused = error(replies)
    assert refused.reason == "unknown_principal"
    text = encode(refused).decode()
    assert "\\\\ud800" in text or "\\ud800" in text


async def test_answers_never_go_where_the_asker_may_not_read(harness: Harness) -> None:
    """A refused request is not answered on the topic it named (another's replies, a job's
    events, the alerts), and a submission refused for an existing job's id puts no event on
    that job's topic."""
    await harness.send(TOPICS.submit, {"id": "theirs", "spec": SPEC}, CI)
    for reply_to in (
        f"{TOPICS.prefix}/alerts",
        replies_to(CI),
        TOPICS.job_events("theirs"),
    ):
        body = {"id": "mine-1", "reply_to": reply_to, "spec": SPEC}
        replies = await harness.send(TOPICS.submit, body, OTHER)
        # Said on errors, and as the "rejected" event of the (free) id it asked for.
        assert [r.topic for r in replies] == [TOPICS.errors, TOPICS.job_events("mine-1")]
    # Another's job id with another spec: a conflict, said on errors and to the asker only.
    body = {"id": "theirs", "reply_to": replies_to(OTHER), "spec": {**SPEC, "priority": 7}}
    replies = await harness.send(TOPICS.submit, body, OTHER)
    assert sorted(r.topic for r in replies) == sorted([TOPICS.errors, replies_to(OTHER)])


@pytest.mark.parametrize(
    ("who", "body", "reason", "event"),
    [
        (DASH, {"id": "v2", "spec": SPEC}, "forbidden", True),  # a viewer may not submit
        (CI, {"id": "z1", "spec": {**SPEC, "iterations": 0}}, "invalid", True),
        (CI, {"id": "z2", "spec": SPEC, "bogus_key": 1}, "invalid", True),
        (CI, {"id": "a/b", "spec": SPEC}, "invalid", False),  # no topic for a bad id
    ],
)
async def test_a_signed_request_refused_unread_is_answered_on_its_own_reply_topic(
    harness: Harness, who: Credentials, body: dict[str, Any], reason: str, event: bool
) -> None:
    """A refusal before the request was read whole (its role, a field) reached only
    <prefix>/errors: a CI client waiting on its reply topic and its job's events (as
    examples/ci_client.py does) waited for ever."""
    body = {**body, "reply_to": replies_to(who), "correlation": "c-42"}
    replies = await harness.send(TOPICS.submit, body, who)
    assert error(replies).reason == reason
    told = answer(replies, who)
    assert not told.accepted and told.problems == error(replies).problems
    assert told.correlation == "c-42"
    events = [r.message for r in replies if r.topic.endswith("/events")]
    assert bool(events) is event
    if event:
        # The follower of this id knows the refusal for its own by who sent it.
        (rejected,) = events
        assert rejected.kind == "rejected" and rejected.data["principal"] == who.principal
        assert [r.topic for r in replies if r.message is rejected] == [
            TOPICS.job_events(body["id"])
        ]


async def test_a_flood_of_unsigned_messages_is_counted_not_answered_one_by_one(
    harness: Harness,
) -> None:
    """20,000 unsigned payloads were each answered on errors (and audited), one publish after
    another: a real submission behind them waited 13 s instead of 0.5. Each is still counted
    in /metrics (those past the rate were not: a flood's 240,000 showed as 1,520)."""
    from structlog.testing import capture_logs

    from labd.events import AccessRefused
    from labd.mqtt.flood import UnsignedFlood

    flood = harness.inbound.unsigned = UnsignedFlood(clock=lambda: 0.0)  # in one instant
    flood.unanswered.EVERY_S = 0.05  # a minute, for the test
    refusals = harness.lab.bus.subscribe("refusals", AccessRefused, maxsize=2_000)
    with capture_logs() as logs:
        answered = [await harness.raw(TOPICS.submit, b'{"x": 1}') for _ in range(1_000)]
        body = {"id": "real", "reply_to": replies_to(CI), "spec": SPEC}
        real = await harness.send(TOPICS.submit, body, CI)
        await asyncio.sleep(0.2)  # the flood is over: the rest is said, once
    assert sum(bool(r) for r in answered) == 100  # the burst: none refilled in no time
    assert answer(real).accepted  # a signed request is always answered
    warnings = [e for e in logs if "unsigned mqtt messages" in e["event"]]
    assert [w["left_out"] for w in warnings] == [1, 899]
    counted = []
    while (event := refusals.get_nowait()) is not None:
        assert isinstance(event, AccessRefused)
        counted.append(event)
    assert sum(e.count for e in counted if e.reason == "unsigned") == 1_000


async def test_a_replay_is_answered_only_on_errors(harness: Harness) -> None:
    original = payload(TOPICS.submit, {"id": "r1", "reply_to": replies_to(CI), "spec": SPEC}, CI)
    first = await harness.raw(TOPICS.submit, original)
    assert answer(first).accepted
    again = await harness.raw(TOPICS.submit, original)
    assert [r.topic for r in again] == [TOPICS.errors] and error(again).reason == "replayed"


async def test_a_request_meeting_a_closed_database_is_answered_unavailable(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database failing under a request (injected as PostgreSQL's driver reports it; the
    real outage is tests/integration/mqtt/test_resilience.py's) is answered, not dropped."""
    from sqlalchemy.exc import OperationalError

    async def unreachable(*_: object, **__: object) -> None:
        raise OperationalError("INSERT", {}, ConnectionRefusedError("connection refused"))

    monkeypatch.setattr(harness.lab.store, "submit_job", unreachable)
    body = {"id": "late", "reply_to": replies_to(CI), "spec": SPEC}
    replies = await harness.send(TOPICS.submit, body, CI)
    assert error(replies).reason == "unavailable"
    assert "nothing was done, send it again" in answer(replies).problems[0]
    # The client's own answer says so too: `labd submit --via mqtt` exits 3 for it, as over
    # the API (it exited 2, a usage error, for a full disk).
    assert answer(replies).reason == "unavailable"
    assert refusal_error(answer(replies).model_dump()).exit_code == EXIT_RUNTIME
    assert (
        refusal_error({"problems": ["spec: bad"], "reason": "invalid_spec"}).exit_code == EXIT_USAGE
    )


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [62, 300, 500, 980, 5_000])
@pytest.mark.parametrize("signature", ["valid", "forged"])
async def test_a_payload_nested_too_deeply_is_refused_before_anything_recursive(
    harness: Harness, depth: int, signature: str
) -> None:
    """spec.params.env nested 500 deep got no answer: json.loads took it, then the signature's
    canonical form (recursive) raised RecursionError. One limit (labd.validation.MAX_DEPTH,
    the whole message counted) now refuses it on the errors topic first, however it is signed
    and whether or not the parser itself gave up."""
    import sys

    from labd.validation import MAX_DEPTH

    body = {
        "id": f"deep-{depth}",
        "reply_to": replies_to(CI),
        "spec": {**SPEC, "params": {"env": nested(depth)}},
    }
    assert depth + 3 > MAX_DEPTH  # the message, spec and params hold env
    fake = {"principal": "ci", "key_id": CI.key_id, "time": 1.0, "nonce": "abcdefgh"}
    forged = {"schema_version": 2, **body, "auth": {**fake, "signature": "x"}}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(4 * depth + limit)  # writing and signing it recurse (here only)
    try:
        data = (
            payload(TOPICS.submit, body, CI)
            if signature == "valid"
            else json.dumps(forged).encode()
        )
    finally:
        sys.setrecursionlimit(limit)
    replies = await harness.raw(TOPICS.submit, data)
    refused = error(replies)
    assert refused.reason == "invalid"
    assert refused.problems == [f"{TOPICS.submit}: payload is nested more than 64 levels deep"]
    assert [r.topic for r in replies] == [TOPICS.errors]
    assert await harness.lab.store.get_job(f"deep-{depth}") is None
    # Just within the limit, the same message is not refused for its depth.
    body["spec"]["params"]["env"] = nested(MAX_DEPTH - 3)
    problems = error(await harness.send(TOPICS.submit, body, CI)).problems
    assert not any("nested" in p for p in problems)


@pytest.mark.parametrize("bad", ["\x00", "\x7f", "\x85", "\ufdd0", "\uffff", "\U0010fffe"])
async def test_a_reply_to_a_broker_would_find_malformed_is_refused_on_errors_only(
    harness: Harness, bad: str
) -> None:
    """A viewer's query with reply_to .../replies/dash/<NUL> made labd publish on a topic
    Mosquitto refuses as malformed, and Mosquitto dropped labd's connection: it is refused."""
    from labd.mqtt.topics import topic_problem

    query = {"query": "list", "reply_to": replies_to(DASH) + bad}
    replies = await harness.send(TOPICS.query, query, DASH)
    refused = error(replies)
    assert refused.reason == "invalid", refused
    assert "reply_to: not a topic labd can answer on: it contains a" in refused.problems[0]
    assert f"(U+{ord(bad):04X})" in refused.problems[0]
    assert [r.topic for r in replies] == [TOPICS.errors]
    # An MQTT 5 response topic holding one is not answered on either.
    query["reply_to"] = replies_to(DASH)
    data = payload(TOPICS.query, query, DASH)
    replies = await harness.inbound.handle(TOPICS.query, data, replies_to(DASH) + bad, b"c")
    assert [r.topic for r in replies] == [replies_to(DASH)]
    assert all(topic_problem(r.topic) is None for r in replies)


async def test_a_refused_request_replayed_is_refused_as_replayed(harness: Harness) -> None:
    """A refused submission's nonce was not recorded: a retained one was handled again at
    every reconnect. Every request whose signature held spends its nonce, refused or not."""
    harness.inbound.principals = Principals(
        [
            principal(CI, Role.SUBMITTER, scenarios=frozenset({"command"})),
            principal(DASH, Role.VIEWER),
        ]
    )
    for creds, body, reason in (
        (CI, {"id": "n1", "spec": SPEC}, "invalid_spec"),  # a scenario it may not run
        (DASH, {"id": "n2", "spec": SPEC}, "forbidden"),  # a viewer submitting
        (CI, {"id": "n3", "spec": {**SPEC, "nope": 1}}, "invalid"),
        (CI, {"reply_to": f"{TOPICS.prefix}/alerts"}, "forbidden"),  # a cancel, elsewhere
    ):
        topic = TOPICS.submit if "id" in body else f"{TOPICS.prefix}/jobs/n9/cancel"
        captured = payload(topic, body, creds)
        assert error(await harness.raw(topic, captured)).reason == reason
        again = await harness.raw(topic, captured)
        assert [r.topic for r in again] == [TOPICS.errors] and error(again).reason == "replayed"


async def test_a_quota_refusal_replayed_once_the_quota_has_room_is_not_accepted(
    harness: Harness,
) -> None:
    """A submission refused with quota_exceeded, replayed once the quota had room, was
    accepted as its victim's job."""
    harness.lab.scheduler.stop_taking_work()
    harness.inbound.principals = Principals([principal(CI, Role.SUBMITTER, max_active_jobs=1)])
    assert answer(
        await harness.send(TOPICS.submit, {"id": "q1", "reply_to": replies_to(CI), "spec": SPEC})
    ).accepted
    captured = payload(TOPICS.submit, {"id": "q2", "spec": SPEC}, CI)
    assert error(await harness.raw(TOPICS.submit, captured)).reason == "quota_exceeded"
    await harness.lab.scheduler.cancel("q1")
    assert error(await harness.raw(TOPICS.submit, captured)).reason == "replayed"
    assert await harness.lab.store.get_job("q2") is None


async def test_replays_cost_the_victim_nothing_of_its_rate_limit(harness: Harness) -> None:
    """Replaying one captured submission 10 times made its victim's next one rate_limited:
    the nonce is checked before the rate is taken (CI may submit 3 a minute here)."""
    captured = payload(TOPICS.submit, {"id": "r1", "reply_to": replies_to(CI), "spec": SPEC}, CI)
    assert answer(await harness.raw(TOPICS.submit, captured)).accepted
    for _ in range(10):
        assert error(await harness.raw(TOPICS.submit, captured)).reason == "replayed"
    for n in (2, 3):
        body = {"id": f"r{n}", "reply_to": replies_to(CI), "spec": SPEC}
        assert answer(await harness.send(TOPICS.submit, body, CI)).accepted, n


async def test_another_principals_job_id_is_a_conflict_not_a_duplicate(harness: Harness) -> None:
    """sub2 submitted pr-42 and cancelled it; sub1's pr-42 with the same spec was answered
    accepted, duplicate, with sub2's job. Only its own submitter resubmits an id harmlessly."""
    mine = {"id": "pr-42", "reply_to": replies_to(OTHER), "spec": SPEC}
    assert answer(await harness.send(TOPICS.submit, mine, OTHER), OTHER).accepted
    await harness.send(f"{TOPICS.prefix}/jobs/pr-42/cancel", {}, OTHER)
    body = {"id": "pr-42", "reply_to": replies_to(CI), "spec": SPEC}
    replies = await harness.send(TOPICS.submit, body, CI)
    refused = error(replies)
    assert refused.reason == "conflict"
    assert refused.problems == ["job id 'pr-42' belongs to another submitter"]
    said = answer(replies)
    assert not said.accepted and not said.duplicate and not said.state
    assert sorted(r.topic for r in replies) == sorted([TOPICS.errors, replies_to(CI)])
    again = answer(await harness.send(TOPICS.submit, mine, OTHER), OTHER)
    assert again.accepted and again.duplicate  # its own submitter: harmless


async def test_a_request_labd_fails_on_is_answered_internal_once(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NUL in network.archive raised deep in the archive check: the asker got no answer,
    the nonce stayed unspent, and a retained copy was handled again (a traceback in the log)
    at every reconnect. The archive's name is now checked as text, and a bug of labd's is
    answered `internal` once."""
    spec = {**SPEC, "network": {"archive": "a\u0000b", "profile": "none"}}
    refused = error(await harness.send(TOPICS.submit, {"id": "nul", "spec": spec}))
    assert refused.reason == "invalid", refused
    assert any("network.archive" in p for p in refused.problems), refused.problems

    async def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(harness.lab.jobs, "submit", broken)
    captured = payload(TOPICS.submit, {"id": "bug", "spec": SPEC}, CI)
    first = error(await harness.raw(TOPICS.submit, captured))
    assert (first.reason, first.problems) == (
        "internal",
        [f"{TOPICS.submit}: labd failed handling it (RuntimeError)"],
    )
    assert error(await harness.raw(TOPICS.submit, captured)).reason == "replayed"


@pytest.mark.parametrize("limit", [True, "5"])
async def test_a_query_s_limit_is_a_number_not_a_boolean_or_a_string(
    harness: Harness, limit: object
) -> None:
    """`"limit": true` listed one job and `"5"` five, where the schema says an integer."""
    body = {"query": "list", "limit": limit, "reply_to": replies_to(DASH)}
    shown = answer(await harness.send(TOPICS.query, body, DASH), DASH)
    assert not shown.ok and shown.reason == "invalid"  # type: ignore[union-attr]
    assert "limit: input should be a valid integer" in shown.problems[0]  # type: ignore[union-attr]

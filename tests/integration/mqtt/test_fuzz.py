"""A hypothesis-generated corpus of 1,000+ payloads against the inbound handler, with the real
store, job service, scheduler and pool behind it: every one is answered, nothing raises."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labd.auth import Audit, Principals, sign
from labd.auth.principals import Principal, Role
from labd.config import AuthSettings, MqttSettings
from labd.mqtt import Inbound, Topics
from labd.mqtt.client import encode
from labd.mqtt.messages import ErrorMessage
from labd.store import Store
from tests.integration.mqtt.conftest import CI
from tests.integration.scheduler.test_scheduler import make_lab

TOPICS = Topics("labd/v1/fuzz")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
spec_like = st.fixed_dictionaries(
    {
        "suite": st.text(max_size=12),
        "test": st.text(max_size=12),
        "scenario": st.sampled_from(["script", "x", ""]),
    },
    optional={
        "iterations": st.integers(-5, 20_000) | st.text(max_size=4),
        "params": st.dictionaries(
            st.sampled_from(["sleep_s", "value", "bogus"]), json_values, max_size=3
        ),
        "device": st.dictionaries(
            st.sampled_from(["platform", "tags", "nope"]), json_values, max_size=2
        ),
        "priority": json_values,
    },
)
hostile_text = st.text(max_size=30) | st.sampled_from(
    ["build#123", "a+b", "a/b", "\ud800", "x\x00y", "..", "x" * 10_000, "pr#42"]
)
submit_like = st.fixed_dictionaries(
    {},
    optional={
        "id": hostile_text,
        "reply_to": hostile_text,
        "correlation": hostile_text,
        "spec": spec_like | json_values,
        "schema_version": st.just(2) | json_values,
        "extra": json_values,
    },
)


def signed_by_ci(topic: str, body: dict[str, Any]) -> bytes:
    """Signed when the body has a canonical JSON form (no NaN, no lone surrogate); else sent
    with a forged auth member, as a hostile client would."""
    try:
        return json.dumps(sign(body, topic, CI.principal, CI.key_id, CI.key)).encode()
    except Exception:
        fake = {"principal": "ci", "key_id": CI.key_id, "time": 0, "nonce": "abcdefgh"}
        return json.dumps({**body, "auth": {**fake, "signature": "x"}}).encode()


payloads = st.one_of(
    st.binary(max_size=200).map(lambda b: (False, b)),
    json_values.map(lambda v: (False, json.dumps(v).encode())),
    submit_like.map(lambda v: (False, json.dumps(v).encode())),
    submit_like.map(lambda v: (True, v)),  # signed by a real principal: past the signature
    st.text(max_size=100).map(lambda t: (False, t.encode("utf-8", "surrogatepass"))),
)
topics = st.sampled_from(
    [
        TOPICS.submit,
        f"{TOPICS.prefix}/jobs/some-job/cancel",
        f"{TOPICS.prefix}/devices/d1/command",
        f"{TOPICS.prefix}/nowhere",
    ]
)


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(corpus=st.lists(st.tuples(topics, payloads), min_size=1000, max_size=1000))
async def test_every_fuzzed_payload_is_answered(
    corpus: list[Any], store: Store, tmp_path: Path
) -> None:
    lab = await make_lab(store, tmp_path, ["d1"])
    ci = Principal("ci", Role.ADMIN, keys={CI.key_id: CI.key}, submits_per_minute=100_000)
    inbound = Inbound(
        MqttSettings(),
        AuthSettings(),
        TOPICS,
        Principals([ci]),
        lab.jobs,
        lab.scheduler,
        lab.pool,
        Audit(lab.bus),
    )
    inbound.unsigned.BURST = inbound.unsigned.tokens = float("inf")  # each answered, checked
    refused = 0
    try:
        for topic, (sign_it, payload) in corpus:
            data = signed_by_ci(topic, payload) if sign_it else payload
            replies = await inbound.handle(topic, data)
            errors = [r.message for r in replies if isinstance(r.message, ErrorMessage)]
            for error in errors:
                assert error.problems and all(p.strip() for p in error.problems)
            for reply in replies:  # whatever came in, every answer can be published
                encode(reply.message)
                assert "#" not in reply.topic and "+" not in reply.topic
                reply.topic.encode()
            refused += bool(errors)
    finally:
        await lab.scheduler.stop(1)
        await lab.pool.stop(1)
    assert refused >= 900  # almost all of a random corpus is refused, each with its reasons
    assert len(corpus) == 1000

"""A job spec's free text and integers at the model: the same refusal over MQTT, the API, the
command line and a manifest, whichever database is behind."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from labd.errors import InvalidSpec
from labd.model import TestSpec, parse_spec
from labd.mqtt.messages import SubmitRequest

SPEC: dict[str, Any] = {"suite": "s", "test": "t", "scenario": "script"}
AUTH = {"principal": "ci", "key_id": "k1", "time": 1.0, "nonce": "abcdefgh", "signature": "x"}
BUILD_FIELDS = ("revision", "branch", "build_id", "product")


def refusal(data: dict[str, Any]) -> str:
    with pytest.raises(InvalidSpec) as caught:
        parse_spec(data, "job.toml")
    (problem,) = caught.value.problems
    return problem


@pytest.mark.parametrize("bad", ["a\x00b", "\x00", "a\nb", "tab\there", "esc\x1b[31m", "\x7f"])
@pytest.mark.parametrize("field", BUILD_FIELDS)
def test_control_characters_in_the_build_are_refused_naming_the_field(field: str, bad: str) -> None:
    """A NUL in build.revision was stored (SQLite) or accepted and then broke the history and
    the analysis (PostgreSQL refuses NUL in text)."""
    problem = refusal({**SPEC, "build": {field: bad}})
    assert problem.startswith(f"job.toml: build.{field}: ") and "control character" in problem
    # An A/B variant's build is the same model.
    variant = {"params": {}, "build": {field: bad}}
    ab = {**SPEC, "ab": {"base": {"params": {}}, "new": variant}}
    assert refusal(ab).startswith(f"job.toml: ab.new.build.{field}: ")


def test_a_nul_in_the_baseline_is_refused_naming_the_field() -> None:
    assert refusal({**SPEC, "baseline": "a\x00b"}).startswith("job.toml: baseline: ")


def test_ordinary_build_text_is_kept() -> None:
    build = {
        "revision": "0123abcd",
        "branch": "feature/x y#1",
        "build_id": "ci:42",
        "product": "Firefox Nightly é",
    }
    spec = parse_spec({**SPEC, "build": build, "baseline": "0123abcd"}, "job.toml")
    assert spec.build.model_dump() == build and spec.baseline == "0123abcd"


def test_a_nul_in_an_mqtt_submissions_source_is_refused() -> None:
    with pytest.raises(ValidationError) as caught:
        SubmitRequest.model_validate({"auth": AUTH, "source": "a\x00b", "spec": SPEC})
    assert [e["loc"] for e in caught.value.errors()] == [("source",)]
    assert SubmitRequest.model_validate({"auth": AUTH, "source": "ci.toml", "spec": SPEC})


@pytest.mark.parametrize("field", ["iterations", "warmup", "priority", "max_attempts"])
@pytest.mark.parametrize("value", ["5", True, 5.0])
def test_integers_of_a_spec_are_integers(field: str, value: Any) -> None:
    """schemas/submit_request.json says integer: "5" and true are not taken for 5 and 1."""
    assert refusal({**SPEC, field: value}).startswith(f"job.toml: {field}: input should be")
    assert getattr(TestSpec.model_validate({**SPEC, field: 5}), field) == 5


def test_integers_of_an_ab_spec_are_integers() -> None:
    ab = {"base": {}, "new": {}}
    for field in ("block", "seed"):
        assert refusal({**SPEC, "ab": {**ab, field: "2"}}).startswith(f"job.toml: ab.{field}: ")


def test_stop_when_stable_with_fewer_iterations_than_it_needs_is_refused() -> None:
    """`iterations = 8` with stop_when_stable was queued and could never stop early (a
    re-tester's find): refused, naming the rule's minimum, the stopping rule's own."""
    from labd.model.spec import STABLE_AFTER
    from labd.stats.calibration import STABLE_AFTER as RULES

    assert STABLE_AFTER == RULES
    problem = refusal({**SPEC, "iterations": 8, "stop_when_stable": True})
    assert "stop_when_stable: it stops no earlier than 15 measured iterations, so " in problem
    assert "iterations = 8 can never stop early" in problem
    parse_spec({**SPEC, "iterations": 15, "stop_when_stable": True}, "job.toml")

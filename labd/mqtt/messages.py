"""Every MQTT payload labd reads or writes, as pydantic models with a schema version.
`labd schemas export` turns these into JSON Schema and an AsyncAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from labd.auth import KEY_ID_PATTERN, NONCE_MAX, NONCE_MIN, PRINCIPAL_MAX, SIGNATURE_MAX
from labd.model import OPTIONAL_ID_PATTERN, FreeText, TestSpec, check_id
from labd.mqtt.topics import topic_problem

SCHEMA_VERSION = 1  # of what labd publishes; requests (signed) are at version 2


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = Field(1, description="Version of this message's schema.")


class Signature(BaseModel):
    """Who signed a request and how (HMAC-SHA256 over the RFC 8785 form; see the docs)."""

    model_config = ConfigDict(extra="forbid")

    principal: str = Field(max_length=PRINCIPAL_MAX, description="The principal that signed.")
    key_id: str = Field(pattern=f"^{KEY_ID_PATTERN}$", description="Which of its keys.")
    time: float = Field(description="When it was signed (Unix seconds).")
    nonce: str = Field(
        min_length=NONCE_MIN, max_length=NONCE_MAX, description="Random, once per message."
    )
    signature: str = Field(max_length=SIGNATURE_MAX, description="base64url HMAC-SHA256.")


class Request(Message):
    """Base of every message labd takes in: signed by a principal of the lab. Answers go to
    `reply_to`, which must lie under <prefix>/replies/<principal>/, with `correlation`."""

    schema_version: Literal[2] = Field(2, description="Version of this message's schema.")  # type: ignore[assignment]
    auth: Signature
    reply_to: str = Field(
        "",
        max_length=256,
        pattern=r"^[^#+]*$",
        description="Where the answer goes: a topic under <prefix>/replies/<principal>/, "
        "without wildcards, control characters or Unicode non-characters.",
    )
    correlation: str = Field("", max_length=128, description="Echoed in the answer.")

    @field_validator("reply_to")
    @classmethod
    def _publishable(cls, value: str) -> str:
        # A topic the broker would find malformed: publishing an answer there would make it
        # drop labd's connection.
        if value and (problem := topic_problem(value)):
            raise PydanticCustomError(
                "topic", "not a topic labd can answer on: it {problem}", {"problem": problem}
            )
        return value


class SubmitRequest(Request):
    """In, on <prefix>/jobs/submit: run this test. Answered on reply_to (and on an MQTT 5
    response topic), then the job's events follow on <prefix>/jobs/<id>/events."""

    id: str = Field(
        "",
        pattern=OPTIONAL_ID_PATTERN,
        description="Job id; resubmitting the same id is harmless. Empty: derived from the "
        "signature's nonce, so a redelivered request is harmless too.",
    )
    source: FreeText = Field(
        "", max_length=256, description="What to call the spec in errors, e.g. its file name."
    )
    spec: TestSpec


class ApiSubmission(BaseModel):
    """The body of the HTTP API's POST /api/v1/jobs: SubmitRequest's own fields without the
    MQTT envelope (the API's caller is known by its connection, not a signature), held to the
    same rules: unknown keys and values of the wrong type are refused, naming the field. The
    spec stays raw JSON here: the job service checks it and names each of its problems. Not
    an MQTT message (not in MESSAGES)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        "", description="Job id; resubmitting the same id is harmless. Empty: labd chooses one."
    )
    source: FreeText = Field(
        "", max_length=256, description="What to call the spec in errors, e.g. its file name."
    )
    spec: dict[str, Any]
    submitter: str | None = Field(
        None, description="Only the authenticated principal's own name (or left out)."
    )

    @field_validator("id")
    @classmethod
    def _id_rule(cls, value: str) -> str:
        # The grammar's own words rather than SubmitRequest's bare pattern.
        return check_id(value, "id") if value else value


class CancelRequest(Request):
    """In, on <prefix>/jobs/<id>/cancel: cancel the job in whatever state it is (its
    submitter, or an admin)."""


class DeviceCommand(Request):
    """In, on <prefix>/devices/<id>/command: an administrator's command."""

    action: Literal["drain", "enable", "maintenance"]


class JobQuery(Request):
    """In, on <prefix>/jobs/query: list jobs, or one job's state, results or Perfherder export
    (the daemon's, as its job.log has it). The answer goes to `reply_to` (required here), as
    the local API's JSON, secrets redacted."""

    query: Literal["list", "show", "results", "perfherder"]
    job_id: str = Field("", pattern=OPTIONAL_ID_PATTERN)
    states: list[str] = Field(default_factory=list, max_length=7)
    limit: int = Field(
        50, strict=True, ge=1, le=1000, description="Jobs listed, or iterations per page."
    )
    offset: int = Field(
        0, strict=True, ge=0, description="results: the first iteration of the page."
    )


class QueryAnswer(Message):
    """Out, on a query's reply_to: the answer, or why there is none."""

    query: str
    correlation: str = ""
    ok: bool
    data: dict[str, Any] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)
    reason: str = Field(
        "",
        description="Why it was refused, the code <prefix>/errors gives (`unavailable`: labd "
        "could not do it now, nothing was done, send it again); empty when it was not.",
    )


class JobEvent(Message):
    """Out, QoS 1, on <prefix>/jobs/<id>/events: one lifecycle event. `seq` counts from 1
    per job without gaps (0 for a rejected submission), so consumers can drop duplicates
    (same event_id) and notice gaps."""

    event_id: str
    job_id: str
    seq: int = Field(ge=0)
    kind: Literal[
        "rejected",
        "queued",
        "leased",
        "running",
        "iteration",
        "requeued",
        "cancel_requested",
        "finished",
    ]
    state: str
    time: float
    host: str
    data: dict[str, Any]


class JobStateMessage(Message):
    """Out, retained, on <prefix>/jobs/<id>/state: the job's latest state."""

    job_id: str
    state: str
    seq: int
    time: float


class DeviceStateMessage(Message):
    """Out, retained, on <prefix>/devices/<id>/state."""

    device_id: str
    host: str
    platform: str
    model: str
    state: str
    admin: str
    reason: str


class HostStatus(Message):
    """Out, retained, on <prefix>/hosts/<host>/status; the broker sends "offline" as the
    last will when labd dies. "degraded": online, but `down` names components that failed
    and are restarting."""

    host: str
    status: Literal["online", "degraded", "offline"]
    version: str = ""
    down: dict[str, str] = Field(default_factory=dict)
    # The largest request this host reads ([mqtt] max_payload_bytes): a larger one is refused
    # unread, with no answer, so a client checks against it before it publishes.
    max_payload_bytes: int | None = None


class ArtefactLink(BaseModel):
    """One file of a finished job (a video, heat map, progress curve, the job's log): GET
    `url` with the API's bearer token, any role."""

    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str
    content_type: str
    size: int
    url: str


class ResultMessage(Message):
    """Out, on <prefix>/results/<suite>/<test>: the summary of a finished job."""

    job_id: str
    suite: str
    test: str
    state: str
    device_id: str
    build: dict[str, str]
    summary: dict[str, dict[str, Any]]
    set_aside: dict[str, Any] = Field(
        default_factory=dict,
        description="What the summary leaves out: `count` measured iterations set aside, "
        "`reasons` (each kind of flag and how many times), `by_variant` (per variant of an A/B "
        "job, `job` otherwise), as the API's results say it (empty from older labd).",
    )
    artefacts: list[ArtefactLink] = Field(
        default_factory=list,
        description="The job's files on the API of the host that ran it, the first 100 in "
        "name order; listed only when that host sets artefacts.base_url.",
    )
    artefacts_left_out: int = Field(
        0,
        ge=0,
        description="How many more files the job has than `artefacts` lists: "
        "`artefacts_listing` lists them all, a page at a time.",
    )
    artefacts_listing: str = Field(
        "",
        description="The URL of the job's full artefact listing on that host's API "
        "(GET, paged with ?offset=&limit=); empty without artefacts.base_url.",
    )


class AlertMessage(Message):
    """Out, on <prefix>/alerts: a finished job differs from its baseline (`verdict`:
    regression or improvement), with the ratio new/baseline and its 95% interval."""

    event_id: str
    time: str
    job_id: str
    baseline_job_id: str
    suite: str
    test: str
    metric: str
    verdict: Literal["regression", "improvement"]
    ratio: float
    ratio_ci_low: float
    ratio_ci_high: float
    method: str


class SubmitAnswer(Message):
    """Out, on a submission's reply_to (and MQTT 5 response topic, with its correlation
    data). A duplicate names the existing job's state."""

    job_id: str
    accepted: bool
    duplicate: bool = False
    state: str = ""
    problems: list[str] = Field(default_factory=list)
    correlation: str = ""
    reason: str = Field(
        "",
        description="Why it was refused, the code <prefix>/errors gives (`unavailable`: labd "
        "could not do it now, nothing was done, send it again); empty when it was not.",
    )


class RequestAnswer(Message):
    """Out, on a cancel's or device command's reply_to: done, or why not."""

    ok: bool
    problems: list[str] = Field(default_factory=list)
    correlation: str = ""
    reason: str = Field(
        "",
        description="Why it was refused, the code <prefix>/errors gives (`unavailable`: labd "
        "could not do it now, nothing was done, send it again); empty when it was not.",
    )


class ErrorMessage(Message):
    """Out, on <prefix>/errors: input that was refused, and every reason. `reason` is a short
    code (unsigned, bad_signature, expired, replayed, forbidden, rate_limited, quota_exceeded,
    invalid, invalid_spec ...); `principal` and `correlation` as the refused message claimed
    them (so a client can match its own)."""

    topic: str
    problems: list[str]
    reason: str = "invalid"
    principal: str = ""
    correlation: str = ""


MESSAGES: dict[str, type[Message]] = {
    "submit_request": SubmitRequest,
    "cancel_request": CancelRequest,
    "device_command": DeviceCommand,
    "job_event": JobEvent,
    "job_state": JobStateMessage,
    "device_state": DeviceStateMessage,
    "host_status": HostStatus,
    "result": ResultMessage,
    "alert": AlertMessage,
    "submit_answer": SubmitAnswer,
    "request_answer": RequestAnswer,
    "job_query": JobQuery,
    "query_answer": QueryAnswer,
    "error": ErrorMessage,
}

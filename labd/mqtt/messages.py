"""Every MQTT payload labd reads or writes, as pydantic models with a schema version.
`labd schemas export` turns these into JSON Schema and an AsyncAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from labd.model import TestSpec

SCHEMA_VERSION = 1
ID = r"^[A-Za-z0-9_.:@-]{1,128}$"


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = Field(1, description="Version of this message's schema.")


class SubmitRequest(Message):
    """In, on <prefix>/jobs/submit: run this test. The answer is the job's first event."""

    id: str = Field(
        "", pattern=r"^$|" + ID, description="Job id; resubmitting the same id is harmless."
    )
    sender: str = Field("anonymous", max_length=128, description="Who submits (fair queuing).")
    source: str = Field(
        "", max_length=256, description="What to call the spec in errors, e.g. its file name."
    )
    spec: TestSpec


class CancelRequest(Message):
    """In, on <prefix>/jobs/<id>/cancel: cancel the job in whatever state it is."""

    sender: str = Field("anonymous", max_length=128)


class DeviceCommand(Message):
    """In, on <prefix>/devices/<id>/command: an administrator's command."""

    action: Literal["drain", "enable", "maintenance"]
    sender: str = Field(max_length=128, description="Must be one of mqtt.admin_users.")


class JobQuery(Message):
    """In, on <prefix>/jobs/query: list jobs, or one job's state or results. The answer goes
    to `reply_to` (MQTT 3.1.1 clients too), as the local API's JSON."""

    query: Literal["list", "show", "results"]
    reply_to: str = Field(min_length=1, max_length=256, pattern=r"^[^#+]+$")
    job_id: str = Field("", pattern=r"^$|" + ID)
    states: list[str] = Field(default_factory=list, max_length=7)
    limit: int = Field(50, ge=1, le=1000)


class QueryAnswer(Message):
    """Out, on a query's reply_to: the answer, or why there is none."""

    query: str
    ok: bool
    data: dict[str, Any] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


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
    last will when labd dies."""

    host: str
    status: Literal["online", "offline"]
    version: str = ""


class ResultMessage(Message):
    """Out, on <prefix>/results/<suite>/<test>: the summary of a finished job."""

    job_id: str
    suite: str
    test: str
    state: str
    device_id: str
    build: dict[str, str]
    summary: dict[str, dict[str, Any]]


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
    """Out, on a submission's MQTT 5 response topic, with its correlation data."""

    job_id: str
    accepted: bool
    duplicate: bool = False
    problems: list[str] = Field(default_factory=list)


class ErrorMessage(Message):
    """Out, on <prefix>/errors: input that was refused, and every reason."""

    topic: str
    problems: list[str]
    sender: str = ""


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
    "job_query": JobQuery,
    "query_answer": QueryAnswer,
    "error": ErrorMessage,
}

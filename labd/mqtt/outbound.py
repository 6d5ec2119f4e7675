"""What labd publishes for each typed event it has queued in the outbox: one table, from the
event's class to its MQTT message (docs/mqtt.md describes the messages).

A job's events go to <prefix>/jobs/<id>/events as `JobEvent`s (with the job's retained
state beside them); an alert (`ChangeFound`) goes to <prefix>/alerts as an `AlertMessage`.
The table names, per event, the `kind` on the wire, the job `state` it reports and the
fields it carries in `data`: the MQTT contract, in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labd.events import (
    ChangeFound,
    DeviceChanged,
    Event,
    IterationDone,
    JobCancelRequested,
    JobFinished,
    JobLeased,
    JobQueued,
    JobRejected,
    JobRequeued,
    JobRunning,
)
from labd.model import TERMINAL
from labd.mqtt.messages import (
    AlertMessage,
    DeviceStateMessage,
    JobEvent,
    JobStateMessage,
    Message,
)
from labd.mqtt.topics import Topics


@dataclass(frozen=True)
class Publication:
    """One MQTT message to publish (QoS 1)."""

    topic: str
    message: Message
    retain: bool = False
    expiry_s: int = 0  # MQTT 5 message expiry; 0: none


@dataclass(frozen=True)
class JobWire:
    """A job's event on the wire: its `kind`, the job's `state` after it (None: the event's
    own `state` field) and the event's fields it carries in `data`."""

    kind: str
    state: str | None
    data: tuple[str, ...] = ()


@dataclass(frozen=True)
class AlertWire:
    """An alert on <prefix>/alerts: every field of the event."""


@dataclass(frozen=True)
class DeviceWire:
    """A device's retained state on <prefix>/devices/<id>/state (not queued in the outbox:
    the newest state is what matters, and the bridge publishes every device's on connect)."""


OUTBOUND: dict[type[Event], JobWire | AlertWire | DeviceWire] = {
    JobRejected: JobWire("rejected", "rejected", ("problems", "reason", "principal")),
    JobQueued: JobWire("queued", "queued", ("submitter", "suite", "test", "priority")),
    JobLeased: JobWire("leased", "leased", ("device_id", "host", "attempt")),
    JobRunning: JobWire("running", "running"),
    IterationDone: JobWire(
        "iteration", "running", ("attempt", "index", "warmup", "values", "error", "device_id")
    ),
    JobRequeued: JobWire("requeued", "queued", ("reason", "retry_in_s", "attempt_counted")),
    JobCancelRequested: JobWire("cancel_requested", None),
    JobFinished: JobWire("finished", None, ("error",)),
    ChangeFound: AlertWire(),
    DeviceChanged: DeviceWire(),
}


def job_event_message(event: Event, seq: int, host: str) -> JobEvent:
    """The job event number `seq` as CI reads it (`seq` 0: outside the job's sequence, as a
    refused submission is). KeyError for an event that is not a job's."""
    wire = OUTBOUND[type(event)]
    if not isinstance(wire, JobWire):
        raise KeyError(f"{event.kind} is not a job's event")
    fields: dict[str, Any] = event.model_dump(mode="json")
    return JobEvent(
        event_id=event.event_id,
        job_id=fields["job_id"],
        seq=seq,
        kind=wire.kind,  # the table's kinds are JobEvent.kind's (tests/unit/mqtt)
        state=wire.state or fields["state"],
        time=event.time.timestamp(),
        host=host,
        data={name: fields[name] for name in wire.data},
    )


# The states a job's retained state ends in: after them it changes no more.
ENDED = frozenset({*(state.value for state in TERMINAL), "rejected"})


def publications(
    event: Event, key: str, seq: int, host: str, topics: Topics, ended_expiry_s: int = 0
) -> list[Publication]:
    """The messages that deliver `event`, queued under `key` (the job id of a job's event,
    the device id of a device's). An ended job's retained state expires after
    `ended_expiry_s` (0: never), so the broker does not keep one for every job ever run."""
    wire = OUTBOUND[type(event)]
    if isinstance(wire, AlertWire):
        alert = AlertMessage.model_validate(event.model_dump(mode="json"))
        return [Publication(topics.alerts, alert)]
    if isinstance(wire, DeviceWire):
        device = DeviceStateMessage.model_validate(event.model_dump(exclude={"event_id", "time"}))
        return [Publication(topics.device_state(key), device, retain=True)]
    message = job_event_message(event, seq, host)
    state = JobStateMessage(job_id=key, state=message.state, seq=seq, time=message.time)
    return [
        Publication(topics.job_events(key), message),
        Publication(
            topics.job_state(key),
            state,
            retain=True,
            expiry_s=ended_expiry_s if message.state in ENDED else 0,
        ),
    ]

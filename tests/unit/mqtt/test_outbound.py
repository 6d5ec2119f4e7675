"""The outbound table: every typed event labd queues becomes the MQTT message of the contract."""

from __future__ import annotations

from typing import get_args

import pytest

from labd.events import (
    ChangeFound,
    DeviceChanged,
    IterationDone,
    JobCancelRequested,
    JobFinished,
    JobRequeued,
    deserialise,
)
from labd.mqtt.messages import AlertMessage, DeviceStateMessage, JobEvent, JobStateMessage
from labd.mqtt.outbound import OUTBOUND, JobWire, job_event_message, publications
from labd.mqtt.topics import Topics

TOPICS = Topics("lab")


def test_the_table_covers_every_kind_of_job_event_the_contract_names() -> None:
    """No wire kind without a typed event behind it, and no job event without a wire kind."""
    kinds = {wire.kind for wire in OUTBOUND.values() if isinstance(wire, JobWire)}
    assert kinds == set(get_args(JobEvent.model_fields["kind"].annotation))


@pytest.mark.parametrize(
    "event_type", [t for t, wire in OUTBOUND.items() if isinstance(wire, JobWire)]
)
def test_every_data_field_is_a_field_of_its_event(event_type: type) -> None:
    wire = OUTBOUND[event_type]
    assert isinstance(wire, JobWire)
    assert set(wire.data) <= set(event_type.model_fields)
    assert "job_id" in event_type.model_fields
    assert wire.state is not None or "state" in event_type.model_fields


def test_a_stored_requeue_goes_out_as_the_job_event_and_its_retained_state() -> None:
    event = JobRequeued(job_id="j1", reason="adb gone", attempt=2, retry_in_s=4.0)
    stored = deserialise(event.serialised())  # as the outbox keeps it
    events, state = publications(stored, "j1", 7, "host-a", TOPICS)
    assert events.topic == "lab/jobs/j1/events" and not events.retain
    assert isinstance(events.message, JobEvent)
    assert events.message.model_dump() == {
        "schema_version": 1,
        "event_id": event.event_id,
        "job_id": "j1",
        "seq": 7,
        "kind": "requeued",
        "state": "queued",
        "time": event.time.timestamp(),
        "host": "host-a",
        "data": {"reason": "adb gone", "retry_in_s": 4.0, "attempt_counted": True},
    }
    assert (state.topic, state.retain) == ("lab/jobs/j1/state", True)
    assert state.message == JobStateMessage(
        job_id="j1", state="queued", seq=7, time=event.time.timestamp()
    )


def test_events_whose_state_varies_report_their_own() -> None:
    finished = JobFinished(
        job_id="j", state="timed_out", error="late", suite="s", test="t", device_id="d"
    )
    assert job_event_message(finished, 3, "h").state == "timed_out"
    assert job_event_message(finished, 3, "h").data == {"error": "late"}
    asked = JobCancelRequested(job_id="j", state="running")
    assert (job_event_message(asked, 4, "h").kind, job_event_message(asked, 4, "h").state) == (
        "cancel_requested",
        "running",
    )


def test_an_iteration_carries_its_values_not_its_duration() -> None:
    done = IterationDone(
        job_id="j", device_id="d", attempt=1, index=0, warmup=False,
        values={"load_ms": 812.0}, error="", duration_s=1.5,
    )  # fmt: skip
    assert job_event_message(done, 2, "h").data == {
        "attempt": 1, "index": 0, "warmup": False, "values": {"load_ms": 812.0},
        "error": "", "device_id": "d",
    }  # fmt: skip


def test_an_alert_and_a_device_change_go_to_their_own_topics() -> None:
    change = ChangeFound(
        job_id="new", baseline_job_id="old", suite="s", test="t", metric="load_ms",
        verdict="regression", ratio=1.1, ratio_ci_low=1.05, ratio_ci_high=1.15, method="welch",
    )  # fmt: skip
    (alert,) = publications(change, "new", 0, "h", TOPICS)
    assert alert.topic == "lab/alerts" and isinstance(alert.message, AlertMessage)
    assert alert.message.event_id == change.event_id and alert.message.ratio == 1.1
    device = DeviceChanged(
        device_id="p1", host="h", platform="android", model="Pixel 7", state="available",
        admin="enabled", reason="",
    )  # fmt: skip
    (state,) = publications(device, "p1", 0, "h", TOPICS)
    assert (state.topic, state.retain) == ("lab/devices/p1/state", True)
    assert isinstance(state.message, DeviceStateMessage) and state.message.model == "Pixel 7"


def test_an_event_that_is_not_a_job_s_has_no_job_event() -> None:
    change = ChangeFound(
        job_id="j", baseline_job_id="b", suite="s", test="t", metric="m",
        verdict="improvement", ratio=0.9, ratio_ci_low=0.8, ratio_ci_high=0.95, method="welch",
    )  # fmt: skip
    with pytest.raises(KeyError, match="not a job's event"):
        job_event_message(change, 1, "h")


def test_an_ended_state_expiry_under_a_second_still_expires() -> None:
    """A re-tester's find: `ended_state_expiry_h = 0.0001` rounded to 0 s, which MQTT reads as
    no expiry, and the state stayed for ever: the opposite of what was asked."""
    from labd.mqtt.bridge import expiry_s

    assert (expiry_s(0.0001), expiry_s(0), expiry_s(24)) == (1, 0, 86400)

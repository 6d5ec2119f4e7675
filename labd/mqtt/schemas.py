"""JSON Schema of every MQTT message and an AsyncAPI 3 document of the topics, generated from
the pydantic models (`labd schemas export`); a test fails when the committed files drift."""

from __future__ import annotations

import json
from typing import Any

from pydantic.json_schema import models_json_schema

from labd import __version__
from labd.mqtt.messages import MESSAGES

# (channel, address under the prefix, message, labd's action, description)
CHANNELS = [
    ("submit", "jobs/submit", "submit_request", "receive", "CI submits a job."),
    ("cancel", "jobs/{job_id}/cancel", "cancel_request", "receive", "Cancel a job."),
    ("query", "jobs/query", "job_query", "receive", "List jobs, or one job's state or results."),
    (
        "queryAnswers",
        "replies/{principal}/{reply_id}",
        "query_answer",
        "send",
        "The answer to a query, on the asker's reply_to, only it may read.",
    ),
    (
        "command",
        "devices/{device_id}/command",
        "device_command",
        "receive",
        "An administrator drains, enables or takes a device into maintenance.",
    ),
    (
        "jobEvents",
        "jobs/{job_id}/events",
        "job_event",
        "send",
        "Every lifecycle event of a job, QoS 1, numbered per job.",
    ),
    (
        "jobState",
        "jobs/{job_id}/state",
        "job_state",
        "send",
        "The job's latest state (retained; an ended job's expires: mqtt.ended_state_expiry_h).",
    ),
    (
        "deviceState",
        "devices/{device_id}/state",
        "device_state",
        "send",
        "A device's state (retained).",
    ),
    (
        "hostStatus",
        "hosts/{host}/status",
        "host_status",
        "send",
        "online, degraded (a component down), or offline (retained; the last will when labd dies).",
    ),
    ("results", "results/{suite}/{test}", "result", "send", "The summary of a finished job."),
    ("alerts", "alerts", "alert", "send", "A regression or improvement against a baseline."),
    ("errors", "errors", "error", "send", "Refused input, with every reason."),
    (
        "answers",
        "replies/{principal}/{reply_id}",
        "submit_answer",
        "send",
        "The answer to a submission, on its reply_to (and MQTT 5 response topic, with its "
        "correlation data), under the submitter's own replies.",
    ),
    (
        "requestAnswers",
        "replies/{principal}/{reply_id}",
        "request_answer",
        "send",
        "The answer to a cancel or a device command, on its reply_to.",
    ),
]


def message_schemas() -> dict[str, dict[str, Any]]:
    """One standalone JSON Schema per message, by message name."""
    return {name: model.model_json_schema() for name, model in MESSAGES.items()}


def asyncapi() -> dict[str, Any]:
    """The AsyncAPI 3 document of labd's topics, from labd's point of view."""
    _, defs = models_json_schema(
        [(model, "validation") for model in MESSAGES.values()],
        ref_template="#/components/schemas/{model}",
    )
    schemas = defs["$defs"]
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for channel, address, message, action, description in CHANNELS:
        parameters = {
            part.strip("{}"): {"description": f"the {part.strip('{}').replace('_', ' ')}"}
            for part in address.split("/")
            if part.startswith("{")
        }
        full = address if address.startswith("{re") else "labd/v1/{lab}/" + address
        parameters = {"lab": {"description": "daemon.lab (or mqtt.prefix)"}, **parameters}
        if full.startswith("{re"):
            parameters.pop("lab")
        channels[channel] = {
            "address": full,
            "description": description,
            "parameters": parameters,
            "messages": {message: {"$ref": f"#/components/messages/{message}"}},
        }
        operations[f"{action}_{channel}"] = {
            "action": action,
            "channel": {"$ref": f"#/channels/{channel}"},
            "messages": [{"$ref": f"#/channels/{channel}/messages/{message}"}],
        }
    messages = {
        name: {
            "name": name,
            "contentType": "application/json",
            "summary": (model.__doc__ or "").strip().split("\n")[0],
            "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
        }
        for name, model in MESSAGES.items()
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "labd",
            "version": __version__,
            "description": "CI submits and follows performance-test jobs; labd publishes "
            "events, device and host state, results and errors. Every payload is JSON with a "
            "schema_version.",
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }


def export_files() -> dict[str, str]:
    """File name -> content of everything `labd schemas export` writes."""
    files = {f"{name}.json": _dump(schema) for name, schema in message_schemas().items()}
    files["asyncapi.json"] = _dump(asyncapi())
    return files


def _dump(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"

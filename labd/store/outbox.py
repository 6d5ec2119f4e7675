"""Writing and draining the outbox. A job event is appended inside the transaction that makes
the change it reports, so an event exists exactly when its change does, crash or not."""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from labd.store.tables import jobs, outbox

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class OutboxRow:
    id: int
    stream: str
    key: str
    seq: int
    body: dict[str, Any]


def job_event(
    host: str, job_id: str, seq: int, kind: str, state: str, data: dict[str, Any]
) -> dict[str, Any]:
    """The body of a job's event number `seq`."""
    return {
        "schema_version": SCHEMA_VERSION,
        "event_id": uuid.uuid4().hex,
        "job_id": job_id,
        "seq": seq,
        "kind": kind,
        "state": state,
        "time": time.time(),
        "host": host,
        "data": data,
    }


def job_event_row(host: str, body: dict[str, Any]) -> dict[str, Any]:
    """The outbox row that queues a job event."""
    return {
        "host": host,
        "stream": "job",
        "key": body["job_id"],
        "seq": body["seq"],
        "body": body,
        "created_at": body["time"],
    }


# An UPDATE built once with bind parameters: building an expression costs more than running it.
NEXT_EVENT_SEQ = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("job_id"))
    .values(event_seq=jobs.c.event_seq + 1)
    .returning(jobs.c.event_seq)
)


def append_job_event(
    conn: sa.Connection, host: str, job_id: str, kind: str, state: str, data: dict[str, Any]
) -> None:
    """Number the job's next event and queue it, in the caller's transaction."""
    seq = conn.execute(NEXT_EVENT_SEQ, {"job_id": job_id}).scalar_one()
    body = job_event(host, job_id, seq, kind, state, data)
    conn.execute(outbox.insert(), job_event_row(host, body))


def append(conn: sa.Connection, host: str, stream: str, key: str, body: dict[str, Any]) -> None:
    """Queue a message outside a job's event sequence (a result, an alert, an error)."""
    conn.execute(
        outbox.insert().values(
            host=host,
            stream=stream,
            key=key,
            seq=0,
            body={"schema_version": SCHEMA_VERSION, **body},
            created_at=time.time(),
        )
    )


def pending(
    conn: sa.Connection, host: str, limit: int, skip: Collection[int] = ()
) -> list[OutboxRow]:
    query = (
        sa.select(outbox.c.id, outbox.c.stream, outbox.c.key, outbox.c.seq, outbox.c.body)
        .where(outbox.c.host == host)
        .order_by(outbox.c.id)
        .limit(limit)
    )
    if skip:
        query = query.where(outbox.c.id.not_in(list(skip)))
    rows = conn.execute(query)
    return [OutboxRow(r.id, r.stream, r.key, r.seq, r.body) for r in rows]

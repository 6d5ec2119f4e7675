"""Writing and draining the outbox. A job's typed event is appended inside the transaction
that makes the change it reports, so an event exists exactly when its change does, crash or
not; the store publishes it on the bus once the transaction has committed."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from labd.events import (
    Event,
    IterationDone,
    JobCancelRequested,
    JobFinished,
    JobLeased,
    JobQueued,
    JobRequeued,
    JobRunning,
)
from labd.store.tables import jobs, outbox

# The events a job's sequence numbers (stream "job", keyed by the job id); each has job_id.
JobEvent = (
    JobQueued
    | JobLeased
    | JobRunning
    | IterationDone
    | JobRequeued
    | JobCancelRequested
    | JobFinished
)


@dataclass(frozen=True)
class OutboxRow:
    id: int
    stream: str
    key: str
    seq: int
    body: dict[str, Any]


def event_row(host: str, stream: str, key: str, seq: int, event: Event) -> dict[str, Any]:
    """The outbox row that queues `event`, serialised, for `host`'s daemon to deliver (its
    MQTT bridge maps the event to its message)."""
    return {
        "host": host,
        "stream": stream,
        "key": key,
        "seq": seq,
        "body": event.serialised(),
        "created_at": time.time(),
    }


# An UPDATE built once with bind parameters: building an expression costs more than running it.
NEXT_EVENT_SEQ = (
    jobs.update()
    .where(jobs.c.id == sa.bindparam("job_id"))
    .values(event_seq=jobs.c.event_seq + 1)
    .returning(jobs.c.event_seq)
)


def append_job_event(conn: sa.Connection, host: str, event: JobEvent) -> None:
    """Number the job's next event and queue it, in the caller's transaction."""
    seq = conn.execute(NEXT_EVENT_SEQ, {"job_id": event.job_id}).scalar_one()
    conn.execute(outbox.insert(), event_row(host, "job", event.job_id, seq, event))


def append(conn: sa.Connection, host: str, stream: str, key: str, event: Event) -> None:
    """Queue an event outside a job's event sequence (an alert)."""
    conn.execute(outbox.insert(), event_row(host, stream, key, 0, event))


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


def newest_job_seqs(conn: sa.Connection, host: str) -> dict[str, int]:
    """The newest queued event's number of each job with events in `host`'s outbox."""
    query = (
        sa.select(outbox.c.key, sa.func.max(outbox.c.seq))
        .where(outbox.c.host == host, outbox.c.stream == "job")
        .group_by(outbox.c.key)
    )
    return {key: seq for key, seq in conn.execute(query)}


def discard(conn: sa.Connection, host: str) -> int:
    """Delete every row `host` queued; returns how many (for a host with no MQTT bridge:
    no other host delivers them, since each delivers only its own)."""
    return conn.execute(outbox.delete().where(outbox.c.host == host)).rowcount

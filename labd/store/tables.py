"""The database schema (SQLAlchemy Core), shared by SQLite and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

ACTIVE_STATES = ("leased", "running")
_active = sa.text("state IN ('leased', 'running')")

schema_migrations = sa.Table(
    "schema_migrations",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", sa.Float, nullable=False),
)

jobs = sa.Table(
    "jobs",
    metadata,
    # seq orders jobs of equal priority and rank first-in first-out.
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("id", sa.String(128), nullable=False, unique=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    # Fair queuing between submitters: a submitter's k-th waiting job gets rank k (offset
    # by the queue's progress), so one big batch cannot starve everyone else.
    sa.Column("fair_rank", sa.BigInteger, nullable=False),
    sa.Column("lane", sa.String(64), nullable=False),
    sa.Column("submitter", sa.String(128), nullable=False),
    sa.Column("suite", sa.String(128), nullable=False, server_default=""),  # since v2
    sa.Column("test", sa.String(128), nullable=False, server_default=""),  # since v2
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("spec_hash", sa.String(64), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("device_id", sa.String(128), nullable=False, default=""),
    sa.Column("lease_owner", sa.String(256), nullable=False, default=""),
    sa.Column("lease_token", sa.String(32), nullable=False, default=""),
    sa.Column("lease_expires", sa.Float, nullable=False, default=0.0),
    sa.Column("not_before", sa.Float, nullable=False, default=0.0),
    # A queued job not started by then times out (NULL: submitted before v7, no deadline).
    sa.Column("queue_deadline", sa.Float),  # since v7
    # The device whose infrastructure failed the last attempt: a retry prefers another.
    sa.Column("avoid_device", sa.String(128), nullable=False, server_default=""),  # since v5
    sa.Column("cancel_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("event_seq", sa.Integer, nullable=False, server_default="0"),  # since v3
    sa.Column("submitted_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float),
    sa.Column("finished_at", sa.Float),
    sa.Index("ix_jobs_lease", "state", "lease_expires"),
    # One job per device at a time, enforced by the database itself.
    sa.Index(
        "ux_jobs_active_device",
        "device_id",
        unique=True,
        sqlite_where=_active,
        postgresql_where=_active,
    ),
)

# The dispatcher's query: the best queued job of one lane is the first entry of this index.
sa.Index(
    "ix_jobs_dispatch",
    jobs.c.state,
    jobs.c.lane,
    jobs.c.priority.desc(),
    jobs.c.fair_rank,
    jobs.c.seq,
)
sa.Index("ix_jobs_queue_deadline", jobs.c.state, jobs.c.queue_deadline)
sa.Index("ix_jobs_history", jobs.c.suite, jobs.c.test, jobs.c.state, jobs.c.seq)
sa.Index("ix_jobs_submitter", jobs.c.submitter, jobs.c.state, jobs.c.lane, jobs.c.fair_rank)
sa.Index("ix_jobs_finished", jobs.c.finished_at)  # since v8: retention's scan of ended jobs

lanes = sa.Table(
    "lanes",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("selector", sa.JSON, nullable=False),
    # The scenario its jobs run: only devices whose driver offers it are offered them.
    sa.Column("scenario", sa.String(128), nullable=False, server_default=""),  # since v5
)

devices = sa.Table(
    "devices",
    metadata,
    sa.Column("id", sa.String(128), primary_key=True),
    sa.Column("host", sa.String(256), nullable=False),
    sa.Column("record", sa.JSON, nullable=False),  # the Device model as JSON
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("admin", sa.String(16), nullable=False, default="enabled"),
    sa.Column("updated_at", sa.Float, nullable=False),
)

iterations = sa.Table(
    "iterations",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("idx", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("record", sa.JSON, nullable=False),  # the Iteration model as JSON
)

# What stays of an ended job once retention removed its raw iterations (since v8): the summary
# its results showed and its point of the test's history, so results, trends and `labd detect`
# still read it.
job_digests = sa.Table(
    "job_digests",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("digest", sa.JSON, nullable=False),  # the results' summary and set_aside
    sa.Column("history", sa.JSON, nullable=False),  # the history point ({} when it had none)
    sa.Column("iterations", sa.Integer, nullable=False),  # raw iterations removed
    sa.Column("removed_at", sa.Float, nullable=False),
)

# The transactional outbox: a job's lifecycle events are written in the same transaction as
# the change they describe, numbered per job, and deleted once a sink has delivered them.
outbox = sa.Table(
    "outbox",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("host", sa.String(256), nullable=False),  # the host that delivers it
    sa.Column("stream", sa.String(16), nullable=False),  # job, result, alert, error
    sa.Column("key", sa.String(256), nullable=False),  # the job id (or what the row is about)
    sa.Column("seq", sa.Integer, nullable=False),  # per job, from 1; 0 outside a job
    sa.Column("body", sa.JSON, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("ix_outbox_host", "host", "id"),
)

# Nonces of signed MQTT messages this host has acted on, until they would be refused as expired
# anyway: a captured message replayed later finds its nonce here, even after a restart.
auth_nonces = sa.Table(
    "auth_nonces",
    metadata,
    sa.Column("host", sa.String(256), primary_key=True),
    sa.Column("principal", sa.String(128), primary_key=True),
    sa.Column("nonce", sa.String(64), primary_key=True),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Index("ix_auth_nonces_expiry", "expires_at"),
)

# Outbox rows that could not be published (their topic or payload refused by the client
# library): kept with the error instead of blocking every row behind them.
outbox_set_aside = sa.Table(
    "outbox_set_aside",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("host", sa.String(256), nullable=False),
    sa.Column("stream", sa.String(16), nullable=False),
    sa.Column("key", sa.String(256), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("body", sa.JSON, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("set_aside_at", sa.Float, nullable=False),
)

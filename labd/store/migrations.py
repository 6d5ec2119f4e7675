"""Schema migrations, applied in order at start; each runs once, recorded by version.

Several hosts may start at once against one PostgreSQL database: an advisory lock makes
them take turns, and each re-reads the applied versions under the lock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from labd.store import tables

MIGRATION_LOCK = 0x1ABD  # PostgreSQL advisory lock key for migrations


def _v1_initial(conn: Connection) -> None:
    for table in (tables.jobs, tables.lanes, tables.devices, tables.iterations):
        table.create(conn, checkfirst=True)


def _v2_history_columns(conn: Connection) -> None:
    """jobs.suite and jobs.test, indexed, so a test's history is one index range."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("jobs")}
    for name in ("suite", "test"):
        if name not in have:  # a database made by v1 (a fresh one has them already)
            conn.execute(
                sa.text(f"ALTER TABLE jobs ADD COLUMN {name} VARCHAR(128) NOT NULL DEFAULT ''")
            )
    rows = conn.execute(sa.select(tables.jobs.c.seq, tables.jobs.c.spec)).all()
    for seq, spec in rows:
        conn.execute(
            tables.jobs.update()
            .where(tables.jobs.c.seq == seq)
            .values(suite=spec.get("suite", ""), test=spec.get("test", ""))
        )
    index = next(i for i in tables.jobs.indexes if i.name == "ix_jobs_history")
    index.create(conn, checkfirst=True)


def _v3_outbox(conn: Connection) -> None:
    """The outbox table and the per-job event sequence."""
    if "event_seq" not in {c["name"] for c in sa.inspect(conn).get_columns("jobs")}:
        conn.execute(sa.text("ALTER TABLE jobs ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0"))
    tables.outbox.create(conn, checkfirst=True)


def _v4_auth_nonces(conn: Connection) -> None:
    """Nonces of signed messages acted on (replay protection that survives a restart), and
    outbox rows set aside because they could not be published."""
    tables.auth_nonces.create(conn, checkfirst=True)
    tables.outbox_set_aside.create(conn, checkfirst=True)


def _v5_scenario_lanes(conn: Connection) -> None:
    """Lanes by selector and scenario, and the device a retry avoids. Jobs still waiting or
    running move to the lane of their scenario."""
    from labd.model import DeviceSelector
    from labd.store.base import lane_key

    if "scenario" not in {c["name"] for c in sa.inspect(conn).get_columns("lanes")}:
        conn.execute(
            sa.text("ALTER TABLE lanes ADD COLUMN scenario VARCHAR(128) NOT NULL DEFAULT ''")
        )
    if "avoid_device" not in {c["name"] for c in sa.inspect(conn).get_columns("jobs")}:
        conn.execute(
            sa.text("ALTER TABLE jobs ADD COLUMN avoid_device VARCHAR(128) NOT NULL DEFAULT ''")
        )
    jobs, lanes = tables.jobs, tables.lanes
    known = set(conn.scalars(sa.select(lanes.c.key)))
    waiting = sa.select(jobs.c.seq, jobs.c.spec).where(
        jobs.c.state.in_(["queued", "leased", "running"])
    )
    for seq, spec in conn.execute(waiting).all():
        selector = DeviceSelector.model_validate(spec.get("device", {}))
        scenario = spec.get("scenario", "")
        key = lane_key(selector, scenario)
        if key not in known:
            conn.execute(
                lanes.insert().values(key=key, selector=selector.model_dump(), scenario=scenario)
            )
            known.add(key)
        conn.execute(jobs.update().where(jobs.c.seq == seq).values(lane=key))


def _v6_unstorable_values(conn: Connection) -> None:
    """Iterations stored with a NaN or an infinity among their values: SQLite took the bare
    `NaN` that no JSON reader accepts, its own JSON functions included (a test's history then
    failed as if the database were away); PostgreSQL refused it. Each such value is left out
    and its iteration set aside, the reason among its flags. The runner now fails an iteration
    that reports one (labd.stats.refusal)."""
    from labd.stats import json_text, refusal

    if conn.dialect.name != "sqlite":
        return
    table = tables.iterations
    broken = sa.text(
        "SELECT job_id, attempt, idx, record FROM iterations WHERE NOT json_valid(record)"
    )
    for job_id, attempt, idx, text in conn.execute(broken).all():
        try:
            record = json.loads(text)  # Python's reader takes NaN and Infinity
        except ValueError:
            continue  # not a record labd wrote: not guessed at
        values = record.get("values") or {}
        refused = {name: why for name, v in values.items() if (why := refusal(v))}
        record["values"] = {name: v for name, v in values.items() if name not in refused}
        record["flags"] = [*record.get("flags", []), *(
            f"metric {name}: {why}; left out (stored before labd refused such values)"
            for name, why in refused.items()
        )]  # fmt: skip
        record["set_aside"] = record.get("set_aside", False) or bool(refused)
        # Anything else not finite (a condition's reading) becomes null.
        repaired = json.loads(json_text(record))
        key = (table.c.job_id == job_id, table.c.attempt == attempt, table.c.idx == idx)
        conn.execute(table.update().where(*key).values(record=repaired))


def _v7_queue_deadlines(conn: Connection) -> None:
    """jobs.queue_deadline: a job still queued then times out (a job for a device that left the
    lab waited for ever). Jobs already submitted keep none: their submitters were promised
    none."""
    if "queue_deadline" not in {c["name"] for c in sa.inspect(conn).get_columns("jobs")}:
        conn.execute(sa.text("ALTER TABLE jobs ADD COLUMN queue_deadline FLOAT"))
    index = next(i for i in tables.jobs.indexes if i.name == "ix_jobs_queue_deadline")
    index.create(conn, checkfirst=True)


def _v8_retention(conn: Connection) -> None:
    """What stays of a job whose raw iterations retention removed, and the index its scan of
    ended jobs reads."""
    tables.job_digests.create(conn, checkfirst=True)
    index = next(i for i in tables.jobs.indexes if i.name == "ix_jobs_finished")
    index.create(conn, checkfirst=True)


MIGRATIONS: list[tuple[int, str, Callable[[Connection], None]]] = [
    (1, "jobs, lanes, devices, iterations", _v1_initial),
    (2, "jobs.suite and jobs.test for histories", _v2_history_columns),
    (3, "outbox and per-job event sequence numbers", _v3_outbox),
    (4, "signed-message nonces, outbox rows set aside", _v4_auth_nonces),
    (5, "lanes by scenario; the device a retry avoids", _v5_scenario_lanes),
    (6, "iteration values no JSON reader takes (NaN, infinities) set aside", _v6_unstorable_values),
    (7, "queue deadlines", _v7_queue_deadlines),
    (8, "digests of jobs whose raw iterations retention removed", _v8_retention),
]


LATEST = MIGRATIONS[-1][0]


def migrate(conn: Connection) -> list[int]:
    """Apply every migration not yet applied; return the versions applied now."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATION_LOCK})
    tables.schema_migrations.create(conn, checkfirst=True)
    done = set(conn.scalars(sa.select(tables.schema_migrations.c.version)))
    known = {version for version, _, _ in MIGRATIONS}
    if newer := sorted(v for v in done - known if v > max(known)):
        # A newer labd migrated it (a rollback, or a host not yet upgraded on a shared
        # database): this code would write rows that code does not expect.
        raise ValueError(
            f"its schema has version {newer[-1]}, newer than this labd knows (up to "
            f"{max(known)}): run the labd that migrated it (or newer; `labd version` says the "
            "schema each knows), or put back the copy taken before the upgrade (SQLite: the "
            f"one labd made beside the database, ending .schema-{max(known)}.bak)"
        )
    if unknown := sorted(done - known):
        raise ValueError(
            f"its schema_migrations table holds version {unknown[0]}, which no labd made "
            f"(versions are 1 to {max(known)}): the table was changed by hand"
        )
    applied = []
    for version, _, step in MIGRATIONS:
        if version in done:
            continue
        step(conn)
        conn.execute(
            tables.schema_migrations.insert().values(version=version, applied_at=time.time())
        )
        applied.append(version)
    return applied

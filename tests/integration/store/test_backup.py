"""A SQLite database is copied before labd migrates it: the way back from an upgrade, which an
operator had to know to take by hand (a tester found no word of how)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
import structlog

from labd.store import Store, StoreError
from labd.store.migrations import LATEST
from tests.integration.store.test_store import spec


def schema_and_jobs(path: Path) -> tuple[int, list[str]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        schema = db.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        return schema, [row[0] for row in db.execute("SELECT id FROM jobs")]


async def test_a_database_is_copied_before_its_migration_and_only_then(tmp_path: Path) -> None:
    path = tmp_path / "labd.db"
    url = f"sqlite+aiosqlite:///{path}"
    store = await Store.open(url)  # a new database: nothing to copy
    await store.submit_job("kept", spec(), "ci", now=1000.0)
    await store.close()
    assert list(tmp_path.glob("*.bak")) == []
    with contextlib.closing(sqlite3.connect(path)) as db, db:  # as the labd before this one
        db.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))

    with structlog.testing.capture_logs() as logs:
        store = await Store.open(url)
    await store.close()
    copy = tmp_path / f"labd.db.schema-{LATEST - 1}.bak"
    assert schema_and_jobs(copy) == (LATEST - 1, ["kept"])  # the database as it was
    assert schema_and_jobs(path) == (LATEST, ["kept"])
    # Private as the database is (a re-tester read a world-readable copy as nobody).
    assert copy.stat().st_mode & 0o777 == 0o600
    (said,) = [e for e in logs if e["event"] == "database copied before its migration"]
    assert said["copy"] == str(copy) and said["to"] == LATEST

    copy.unlink()
    await (await Store.open(url)).close()  # up to date: no copy
    assert list(tmp_path.glob("*.bak")) == []


async def test_no_migration_runs_without_its_copy(tmp_path: Path) -> None:
    """A full disk during the copy: labd migrated all the same, then could not start, and the
    way back was gone (a re-tester's find). Now it refuses to migrate, saying why."""
    path = tmp_path / "labd.db"
    store = await Store.open(f"sqlite+aiosqlite:///{path}")
    await store.close()
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DELETE FROM schema_migrations WHERE version = ?", (LATEST,))
    (tmp_path / f"labd.db.schema-{LATEST - 1}.bak.partial").mkdir()  # the copy cannot be written
    with pytest.raises(StoreError) as refused:
        await Store.open(f"sqlite+aiosqlite:///{path}")
    assert str(refused.value).startswith(
        f"cannot copy the database before migrating it from schema {LATEST - 1} to {LATEST} ("
    )
    assert "labd migrates none without the copy that is the way back; free 1 MiB beside" in str(
        refused.value
    )
    assert schema_and_jobs(path) == (LATEST - 1, [])  # not migrated
    assert not (tmp_path / f"labd.db.schema-{LATEST - 1}.bak").exists()

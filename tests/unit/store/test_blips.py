"""A database away for a moment is told from a write it refused, and waited out."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from labd.store import LeaseLost, blips, database_blip, outlasting, passing


def sqlite_error(path: Path, lock: bool) -> sqlite3.Error:
    """A real error of SQLite's: 'database is locked' (another process holds the write lock)
    or 'no such table' (a bug, which waiting does not cure)."""
    holder = sqlite3.connect(path, timeout=0)
    holder.execute("CREATE TABLE IF NOT EXISTS t (x)")
    holder.commit()
    other = sqlite3.connect(path, timeout=0)
    try:
        if lock:
            holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError) as raised:
            other.execute("INSERT INTO t VALUES (1)" if lock else "SELECT * FROM missing")
        return raised.value
    finally:
        other.close()
        holder.close()


def wrapped(error: BaseException) -> OperationalError:
    return OperationalError("INSERT ...", {}, error)  # as SQLAlchemy raises it


def test_what_passes_and_what_does_not(tmp_path: Path) -> None:
    locked = sqlite_error(tmp_path / "a.db", lock=True)
    assert "locked" in str(locked)
    for error in (
        ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
        wrapped(locked),
        asyncpg.exceptions.AdminShutdownError("terminating connection"),
        asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
        asyncpg.exceptions.CannotConnectNowError("the database system is starting up"),
    ):
        assert passing(error), error
    for error in (
        wrapped(sqlite_error(tmp_path / "b.db", lock=False)),  # no such table: a bug
        IntegrityError("INSERT ...", {}, sqlite3.IntegrityError("UNIQUE constraint failed")),
        LeaseLost("the lease moved on"),
        asyncpg.exceptions.UndefinedColumnError("column x does not exist"),
        ValueError("connection refused"),
    ):
        assert not passing(error), error


async def test_a_write_waits_out_a_blip_and_a_refusal_is_raised_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(blips, "FIRST_WAIT_S", 0.01)
    tries: list[int] = []

    async def blip_then_ok() -> str:
        tries.append(1)
        if len(tries) < 4:
            raise ConnectionRefusedError(111, "Connect call failed")
        return "stored"

    assert await outlasting(blip_then_ok, "storing") == "stored" and len(tries) == 4

    async def refused() -> None:
        tries.append(1)
        raise LeaseLost("the lease moved on")

    tries.clear()
    with pytest.raises(LeaseLost):
        await outlasting(refused, "storing")
    assert len(tries) == 1

    async def away() -> None:
        raise ConnectionRefusedError(111, "Connect call failed")

    with pytest.raises(ConnectionRefusedError):  # for no longer than it may wait
        await outlasting(away, "settling", within=0.1)


def test_only_what_the_database_raised_is_a_database_blip(tmp_path: Path) -> None:
    locked = wrapped(sqlite_error(tmp_path / "a.db", lock=True))
    assert database_blip(locked)
    assert database_blip(asyncpg.exceptions.AdminShutdownError("terminating connection"))
    assert database_blip(OSError(28, "No space left on device"))  # a full disk, whoever wrote
    # A driver's own: they pass, but say nothing of the database.
    assert not database_blip(TimeoutError("the device did not answer"))
    assert not database_blip(ConnectionRefusedError(111, "adb server refused"))


def test_what_a_restart_or_an_administrators_pause_raises_passes() -> None:
    """`ALTER DATABASE x ALLOW_CONNECTIONS false` (55000) abandoned two running jobs as a
    `driver bug`; so would a cancelled statement, a read-only failover or a deadlock."""
    for error in (
        asyncpg.exceptions.ObjectNotInPrerequisiteStateError(
            'database "x" is not currently accepting connections'
        ),
        asyncpg.exceptions.TooManyConnectionsError("sorry, too many clients already"),
        asyncpg.exceptions.QueryCanceledError("canceling statement due to user request"),
        asyncpg.exceptions.ReadOnlySQLTransactionError("cannot execute UPDATE in a read-only"),
        asyncpg.exceptions.SerializationError("could not serialize access"),
        asyncpg.exceptions.DeadlockDetectedError("deadlock detected"),
        asyncpg.exceptions.LockNotAvailableError("could not obtain lock"),
    ):
        assert passing(wrapped(error)) and database_blip(wrapped(error)), error
    # A database that is gone does not come back by waiting.
    assert not passing(asyncpg.exceptions.DatabaseDroppedError("database dropped"))

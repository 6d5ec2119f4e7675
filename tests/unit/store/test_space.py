"""A full disk is recognised in each form it reaches labd in, and nothing else is taken for it."""

from __future__ import annotations

import errno
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import create_async_engine

from labd.store.space import out_of_space, storage_problem


async def sqlite_full_error(path: Path) -> OperationalError:
    """What SQLAlchemy raises when SQLite cannot grow its file (max_page_count caps it)."""
    engine = create_async_engine(f"sqlite+aiosqlite:///{path}")
    try:
        async with engine.begin() as conn:
            await conn.execute(text("PRAGMA max_page_count = 2"))
            await conn.execute(text("CREATE TABLE t (x BLOB)"))
            with pytest.raises(OperationalError) as raised:
                for _ in range(100):
                    await conn.execute(text("INSERT INTO t VALUES (zeroblob(4096))"))
        return raised.value
    finally:
        await engine.dispose()


async def test_sqlite_full_through_sqlalchemy_is_out_of_space(tmp_path: Path) -> None:
    error = await sqlite_full_error(tmp_path / "full.db")
    assert "database or disk is full" in str(error)
    assert out_of_space(error)
    assert "disk is full" in storage_problem(error)


def test_file_writes_and_postgres_disk_full_are_out_of_space() -> None:
    assert out_of_space(OSError(errno.ENOSPC, "No space left on device"))
    assert out_of_space(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert out_of_space(asyncpg.exceptions.DiskFullError("could not extend file"))
    # Wrapped as the runner or a library re-raises it.
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise RuntimeError("capture failed") from e
    except RuntimeError as wrapped:
        assert out_of_space(wrapped)


def test_other_failures_are_not_taken_for_a_full_disk() -> None:
    for error in (
        OSError(errno.EACCES, "Permission denied"),
        ConnectionRefusedError(errno.ECONNREFUSED, "refused"),
        asyncpg.exceptions.UniqueViolationError("duplicate key"),
        ValueError("disk is full"),  # words alone are not the condition
    ):
        assert not out_of_space(error), error
    assert storage_problem(ConnectionRefusedError()) == "the lab's database is unreachable"

"""Running out of disk space, recognised in each form it arrives in: a file write's ENOSPC,
SQLite's "database or disk is full", PostgreSQL's disk_full. It is this host's condition, not a
device's nor a job's spec: the scheduler must not blame a device for it."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})
PG_DISK_FULL = "53100"  # PostgreSQL's SQLSTATE disk_full


def causes(error: BaseException) -> Iterator[BaseException]:
    """`error` and what it wraps: SQLAlchemy's `orig`, then each cause or context."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        orig = getattr(current, "orig", None)
        if isinstance(orig, BaseException):
            current = orig
        else:
            current = current.__cause__ or current.__context__


def sqlstate(error: BaseException) -> str:
    """PostgreSQL's SQLSTATE of `error` (asyncpg's `sqlstate`, psycopg's `pgcode`), or ""."""
    code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    return code if isinstance(code, str) else ""


def out_of_space(error: BaseException) -> bool:
    """Whether `error`, or what it wraps, is a full disk."""
    for cause in causes(error):
        if isinstance(cause, OSError) and cause.errno in NO_SPACE:
            return True
        if isinstance(cause, sqlite3.Error) and cause.sqlite_errorcode == sqlite3.SQLITE_FULL:
            return True
        if sqlstate(cause) == PG_DISK_FULL:
            return True
    return False


def free_bytes(path: Path) -> int:
    """Space an unprivileged writer may still use on `path`'s file system."""
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def storage_problem(error: BaseException) -> str:
    """What a client is told when the store failed its request."""
    if out_of_space(error):
        return "labd's disk is full (its database or state directory)"
    return "the lab's database is unreachable"

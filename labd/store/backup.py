"""A copy of a SQLite database taken before labd migrates it: the way back from an upgrade
(an older labd refuses a schema newer than it knows, and no migration runs backwards)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import structlog

log = structlog.get_logger("labd.store")


def backup_before_migrating(path: Path, latest: int) -> Path | None:
    """Copy the database at `path` to `<path>.schema-<N>.bak` when its schema (N) is older
    than `latest`; the copy's path, or None when nothing was to be migrated. SQLite's online
    backup, so a copy taken while another process reads it is whole. A copy that cannot be
    taken (the disk full) is said, and the migration goes on: it is one transaction."""
    if not path.is_file() or path.stat().st_size == 0:
        return None  # a new database: nothing to go back to
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as source:
        try:
            current = source.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        except sqlite3.OperationalError:  # no such table: an empty database
            return None
        if current is None or current >= latest:
            return None
        copy = path.with_name(f"{path.name}.schema-{current}.bak")
        try:
            with contextlib.closing(sqlite3.connect(copy)) as target:
                source.backup(target)
        except (sqlite3.Error, OSError) as e:
            copy.unlink(missing_ok=True)
            log.warning(
                "the database could not be copied before its migration; migrating without a copy",
                path=str(path),
                error=str(e),
            )
            return None
    log.info(
        "database copied before its migration",
        copy=str(copy),
        schema=current,
        to=latest,
        hint="to go back to the labd before this one, stop labd and put the copy in place",
    )
    return copy

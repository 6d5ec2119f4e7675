"""A copy of a SQLite database taken before labd migrates it: the way back from an upgrade
(an older labd refuses a schema newer than it knows, and no migration runs backwards)."""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
from pathlib import Path

import structlog

from labd.store.base import StoreError

log = structlog.get_logger("labd.store")


def backup_before_migrating(path: Path, latest: int) -> Path | None:
    """Copy the database at `path` to `<path>.schema-<N>.bak` when its schema (N) is older
    than `latest`; the copy's path, or None when nothing was to be migrated. SQLite's online
    backup, so a copy taken while another process reads it is whole; written aside and
    renamed, so a copy cut off (a crash, a full disk) is never taken for one; private, as the
    database is. StoreError when it cannot be taken: no migration runs without its way back."""
    if not path.is_file() or path.stat().st_size == 0:
        return None  # a new database: nothing to go back to
    read_only = f"{path.resolve().as_uri()}?mode=ro"  # a URI: its name escaped
    with contextlib.closing(sqlite3.connect(read_only, uri=True)) as source:
        try:
            current = source.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
        except sqlite3.OperationalError:  # no such table: an empty database
            return None
        if current is None or current >= latest:
            return None
        copy = path.with_name(f"{path.name}.schema-{current}.bak")
        partial = copy.with_name(copy.name + ".partial")
        try:
            partial.unlink(missing_ok=True)
            os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            with contextlib.closing(sqlite3.connect(partial)) as target:
                source.backup(target)
            partial.replace(copy)
        except (sqlite3.Error, OSError) as e:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            raise StoreError(
                f"cannot copy the database before migrating it from schema {current} to "
                f"{latest} ({e}): labd migrates none without the copy that is the way back; "
                f"free {max(1, math.ceil(path.stat().st_size / 2**20))} MiB beside {path} "
                "and start again"
            ) from e
    log.info(
        "database copied before its migration",
        copy=str(copy),
        schema=current,
        to=latest,
        hint="to go back to the labd before this one, stop labd and put the copy in place",
    )
    return copy

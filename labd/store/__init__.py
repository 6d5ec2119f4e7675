"""Persistence of jobs, devices and raw results (SQLite by default, PostgreSQL for a lab)."""

from labd.store.store import (
    JobConflict,
    Lease,
    Store,
    StoreError,
    default_sqlite_url,
    lane_key,
)

__all__ = ["JobConflict", "Lease", "Store", "StoreError", "default_sqlite_url", "lane_key"]

"""Persistence of jobs, devices and raw results (SQLite by default, PostgreSQL for a lab)."""

from labd.store.base import JobConflict, Lane, Lease, StoreError, lane_key
from labd.store.fencing import LeaseLost
from labd.store.nonces import NonceSeen
from labd.store.store import Store, default_sqlite_url

__all__ = [
    "JobConflict",
    "Lane",
    "Lease",
    "LeaseLost",
    "NonceSeen",
    "Store",
    "StoreError",
    "default_sqlite_url",
    "lane_key",
]

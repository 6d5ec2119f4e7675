"""Persistence of jobs, devices and raw results (SQLite by default, PostgreSQL for a lab)."""

from labd.store.advisory import SessionLock
from labd.store.base import DeviceTaken, JobConflict, Lane, Lease, StoreError, lane_key
from labd.store.blips import database_blip, outlasting, passing
from labd.store.fencing import LeaseLost
from labd.store.hostname import HostName, fleet_device, fleet_devices, running_hosts
from labd.store.nonces import NonceSeen
from labd.store.outbox import OutboxRow
from labd.store.results import (
    HISTORY_PAGE,
    RESULTS_PAGE,
    RawValuesRemoved,
    compare_variants,
    digest_of,
    history_page,
    history_view,
    measured,
    measured_values,
    raw_values_removed,
    removal,
    results_page,
    results_view,
    set_aside,
    summary_of,
)
from labd.store.retention import Retention, Tally
from labd.store.space import causes, free_bytes, out_of_space, storage_problem
from labd.store.store import Store, default_sqlite_url

__all__ = [
    "HISTORY_PAGE",
    "RESULTS_PAGE",
    "DeviceTaken",
    "HostName",
    "JobConflict",
    "Lane",
    "Lease",
    "LeaseLost",
    "NonceSeen",
    "OutboxRow",
    "RawValuesRemoved",
    "Retention",
    "SessionLock",
    "Store",
    "StoreError",
    "Tally",
    "causes",
    "compare_variants",
    "database_blip",
    "default_sqlite_url",
    "digest_of",
    "fleet_device",
    "fleet_devices",
    "free_bytes",
    "history_page",
    "history_view",
    "lane_key",
    "measured",
    "measured_values",
    "out_of_space",
    "outlasting",
    "passing",
    "raw_values_removed",
    "removal",
    "results_page",
    "results_view",
    "running_hosts",
    "set_aside",
    "storage_problem",
    "summary_of",
]

"""A database away for a moment: a restart of PostgreSQL, a lock held a while, a full disk
freed. A running job's writes wait for it rather than end the attempt: a 1-second restart
used to fail the iteration being stored, and three of them failed a 61-iteration job."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError

from labd.store.space import causes, out_of_space, sqlstate

log = structlog.get_logger("labd.store")

T = TypeVar("T")

FIRST_WAIT_S, LONGEST_WAIT_S = 0.5, 5.0


# SQLite: busy or locked by another process, an I/O error, full, its file not there now.
SQLITE_PASSING = frozenset({5, 6, 10, 13, 14})
# PostgreSQL, by SQLSTATE (a class, or one code): what a restart, a failover or an
# administrator's pause raises, and what the server itself asks to try again.
PG_PASSING = (
    "08",  # connection exceptions
    "53",  # out of resources: too many connections (53300), a full disk, memory
    "57P01",  # admin_shutdown: a fast shutdown, pg_terminate_backend
    "57P02",  # crash_shutdown
    "57P03",  # cannot_connect_now: starting up, shutting down, in recovery
    "57P05",  # idle_session_timeout
    "57014",  # query_canceled: pg_cancel_backend, a statement_timeout
    "55000",  # object_not_in_prerequisite_state: ALTER DATABASE ... ALLOW_CONNECTIONS false
    "55P03",  # lock_not_available
    "25006",  # read_only_sql_transaction: a standby after a failover, writes paused
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
)


def passing(error: BaseException) -> bool:
    """Whether `error` says the database could not be reached or written just now (and may be
    again), not that what was written was refused (a constraint, a lost lease, a bug)."""
    if isinstance(error, IntegrityError):
        return False
    if (isinstance(error, DBAPIError) and error.connection_invalidated) or out_of_space(error):
        return True
    for cause in causes(error):
        if isinstance(cause, ConnectionError | TimeoutError):
            return True
        if isinstance(cause, sqlite3.Error) and cause.sqlite_errorcode in SQLITE_PASSING:
            return True
        if sqlstate(cause).startswith(PG_PASSING):
            return True
    return False


def database_blip(error: BaseException) -> bool:
    """A full disk, or a passing error the database raised: not a driver's own time-out or
    refused connection, which say nothing about the database and blame the device as before."""
    if out_of_space(error):
        return True
    return passing(error) and any(
        isinstance(cause, SQLAlchemyError | sqlite3.Error) or sqlstate(cause)
        for cause in causes(error)
    )


async def outlasting(
    write: Callable[[], Awaitable[T]], what: str, within: float | None = None
) -> T:
    """`write()`, tried again while the database is away, for up to `within` seconds (None:
    until it answers, or the caller is cancelled: the lease's heartbeat stops a run whose
    lease it could not renew)."""
    began, wait, said = time.monotonic(), FIRST_WAIT_S, False
    while True:
        try:
            result = await write()
        except Exception as e:
            gone = time.monotonic() - began
            if not passing(e) or (within is not None and gone + wait > within):
                raise
            if not said:
                log.warning(f"database unreachable; {what} waits for it", error=repr(e))
                said = True
            await asyncio.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT_S)
            continue
        if said:
            log.info(
                f"database back; {what} went through", after_s=round(time.monotonic() - began, 1)
            )
        return result

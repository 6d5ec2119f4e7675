"""The lab's clock: the database's, where several hosts share one.

Leases, retries and queue deadlines are times one host writes and another compares with its
own "now": a host whose clock ran a minute ahead would expire every other host's leases a
minute early. So on PostgreSQL the store keeps the offset of the database's clock from this
host's and writes and compares every such time in the database's clock; on SQLite (one host)
the offset is 0. The offset is measured when the store opens and every `EVERY_S` after, and a
host more than `SKEW_WARN_S` off the database is named in a warning: its logs' times (and the
devices' own) disagree with the lab's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
import structlog

log = structlog.get_logger("labd.store")

SAMPLES = 3  # the reading with the shortest round trip is the least uncertain
DATABASE_NOW = sa.text("SELECT extract(epoch FROM clock_timestamp())")


class LabClock:
    """This host's clock, corrected to the database's."""

    EVERY_S = 60.0
    SKEW_WARN_S = 1.0

    def __init__(self, local: Callable[[], float] = time.time) -> None:
        self.local = local
        self.offset = 0.0  # the database's clock less this host's, in seconds
        self.uncertainty = 0.0  # half the round trip of the reading the offset came from
        self._skewed = False

    def now(self) -> float:
        """Seconds since the epoch, by the lab's clock."""
        return self.local() + self.offset

    def read(self, conn: sa.Connection) -> None:
        """Measure the offset on `conn` (PostgreSQL), the best of a few readings."""
        best: tuple[float, float] | None = None
        for _ in range(SAMPLES):
            before = self.local()
            database = float(conn.execute(DATABASE_NOW).scalar_one())
            after = self.local()
            half_trip = (after - before) / 2
            if best is None or half_trip < best[1]:
                best = (database - (before + half_trip), half_trip)
        assert best is not None
        self.offset, self.uncertainty = best
        self._say()

    def _say(self) -> None:
        skewed = abs(self.offset) > self.SKEW_WARN_S + self.uncertainty
        if skewed and not self._skewed:
            log.warning(
                "this host's clock differs from the database's: labd uses the database's for "
                "leases and deadlines; set the host's clock right (NTP) so logs agree",
                offset_s=round(self.offset, 3),
            )
        elif self._skewed and not skewed:
            log.info(
                "this host's clock agrees with the database's again",
                offset_s=round(self.offset, 3),
            )
        self._skewed = skewed

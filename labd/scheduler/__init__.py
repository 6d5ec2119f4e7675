"""Queue, matching, leases, retries, time-outs, cancellation and recovery."""

from labd.scheduler.alerts import BaselineAnalyst
from labd.scheduler.scheduler import Scheduler
from labd.scheduler.submit import JobService

__all__ = [
    "BaselineAnalyst",
    "JobService",
    "Scheduler",
]

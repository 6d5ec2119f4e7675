"""Runs one job on one leased device: setup, warm-up and measured iterations, teardown."""

from labd.runner.fingerprint import differences
from labd.runner.network import archive_path
from labd.runner.run import Outcome, run_job

__all__ = [
    "Outcome",
    "archive_path",
    "differences",
    "run_job",
]

"""Runs one job on one leased device: setup, warm-up and measured iterations, teardown."""

from labd.runner.fingerprint import differences
from labd.runner.network import archive_path, network_fingerprint, with_archive_dir
from labd.runner.run import Outcome, run_job

__all__ = [
    "Outcome",
    "archive_path",
    "differences",
    "network_fingerprint",
    "run_job",
    "with_archive_dir",
]

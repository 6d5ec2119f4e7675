"""Runs one job on one leased device: setup, warm-up and measured iterations, teardown."""

from labd.runner.run import Outcome, run_job

__all__ = ["Outcome", "run_job"]

"""Simulated devices whose iterations take a known time: for chaos runs, dispatch benchmarks
and demos of a lab without hardware. Off unless `[drivers.sim] enabled = true`."""

from labd_sim.driver import SimDriver

__all__ = ["SimDriver"]

"""The device pool: drivers, discovery, health, quarantine and power control."""

from labd.pool.plugins import load_drivers, load_power
from labd.pool.pool import Pool, device_changed

__all__ = ["Pool", "device_changed", "load_drivers", "load_power"]

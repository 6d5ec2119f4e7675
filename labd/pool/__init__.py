"""The device pool: drivers, discovery, health, quarantine and power control."""

from labd.pool.plugins import check_plugin_options, load_drivers, load_power, run_refusals
from labd.pool.pool import Pool, device_changed

__all__ = [
    "Pool",
    "check_plugin_options",
    "device_changed",
    "load_drivers",
    "load_power",
    "run_refusals",
]

"""Reading the host's state: CPU model, thermal zones, load, free disk."""

from __future__ import annotations

import os
import platform
import shutil
from functools import cache
from pathlib import Path
from typing import Any


@cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux: fall back to what platform knows
    return platform.processor() or platform.machine()


def max_temperature_c() -> float | None:
    """The hottest thermal zone in degrees Celsius, or None when there are none."""
    temps = []
    for zone in Path("/sys/class/thermal").glob("thermal_zone*/temp"):
        try:
            temps.append(int(zone.read_text()) / 1000)
        except (OSError, ValueError):
            continue
    return max(temps) if temps else None


def cpu_governor() -> str:
    try:
        return Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        return "unknown"


def environment() -> dict[str, Any]:
    """What a result depends on, recorded with every iteration."""
    return {
        "os": platform.platform(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cpu_governor": cpu_governor(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "temperature_c": max_temperature_c(),
    }


def host_health(path: Path, min_free_mb: int) -> str | None:
    free_mb = shutil.disk_usage(path).free / 2**20
    if free_mb < min_free_mb:
        return f"only {free_mb:.0f} MB free at {path} (need {min_free_mb})"
    return None

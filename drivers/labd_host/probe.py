"""Reading the host's state: CPU model, thermal zones, load, free disk."""

from __future__ import annotations

import hashlib
import os
import platform
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


def conditions(root: Path = Path("/")) -> dict[str, Any]:
    """The host right now, read before and after every iteration: load, CPU frequencies and
    governors, the hottest thermal zone, the thermal-throttle counters. `root` is where
    /proc and /sys are (tests give a stand-in tree)."""
    cpu_dir = root / "sys/devices/system/cpu"
    freqs, governors, throttles = [], set(), 0
    has_throttle = False
    for cpu in sorted(cpu_dir.glob("cpu[0-9]*")):
        freq = _read(cpu / "cpufreq/scaling_cur_freq")
        if freq is not None and freq.isdigit():
            freqs.append(int(freq) // 1000)
        if (governor := _read(cpu / "cpufreq/scaling_governor")) is not None:
            governors.add(governor)
        for name in ("core_throttle_count", "package_throttle_count"):
            count = _read(cpu / "thermal_throttle" / name)
            if count is not None and count.isdigit():
                throttles += int(count)
                has_throttle = True
    loadavg = _read(root / "proc/loadavg")
    temps = [
        int(t) / 1000
        for zone in (root / "sys/class/thermal").glob("thermal_zone*/temp")
        if (t := _read(zone)) is not None and t.lstrip("-").isdigit()
    ]
    return {
        "load_1m": float(loadavg.split()[0]) if loadavg else None,
        "cpus": len(os.sched_getaffinity(0)),
        "cpu_mhz": freqs or None,
        "governor": ",".join(sorted(governors)) or None,
        "temperature_c": max(temps) if temps else None,
        "throttle_count": throttles if has_throttle else None,
    }


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


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


HASHED_AT_MOST = 512 * 2**20  # a program larger than this is named by its size alone


def program_identity(path: str) -> dict[str, Any]:
    """Which program a job ran: where it was found, the file that is (an interpreter is a
    link: python3 -> python3.11) and its SHA-256, so a results page says what was measured
    when /usr/bin/python3 changed under it. Read as labd: the program is on its policy."""
    real = Path(path).resolve()
    record: dict[str, Any] = {"path": path, "real_path": str(real)}
    try:
        size = real.stat().st_size
        record["bytes"] = size
        if size > HASHED_AT_MOST:
            record["sha256"] = f"not computed: over {HASHED_AT_MOST // 2**20} MiB"
        else:
            with real.open("rb") as file:
                record["sha256"] = hashlib.file_digest(file, "sha256").hexdigest()
    except OSError as e:
        record["sha256"] = f"not read: {e.strerror or e}"
    return record

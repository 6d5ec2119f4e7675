"""Reading a device's state from dumpsys and df: battery, thermal status (throttling is the
noise the Jetpack Macrobenchmark study found), free storage, screen."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

THERMAL = {
    0: "none",
    1: "light",
    2: "moderate",
    3: "severe",
    4: "critical",
    5: "emergency",
    6: "shutdown",
}


@dataclass(frozen=True)
class Health:
    battery_level: int | None
    charging: bool | None
    battery_temp_c: float | None
    thermal_status: int | None
    free_storage_mb: float | None
    screen_on: bool | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def unread(self) -> tuple[str, ...]:
        """The checked figures the phone did not give (so not checked)."""
        figures = {
            "battery level": self.battery_level,
            "thermal status": self.thermal_status,
            "free storage": self.free_storage_mb,
        }
        return tuple(name for name, value in figures.items() if value is None)

    def problem(self, min_battery: int, max_thermal: int, min_free_mb: float) -> str | None:
        if (
            self.battery_level is not None
            and self.battery_level < min_battery
            and not self.charging
        ):
            return f"battery at {self.battery_level}% and not charging (minimum {min_battery}%)"
        if self.thermal_status is not None and self.thermal_status > max_thermal:
            status = THERMAL.get(self.thermal_status, self.thermal_status)
            return f"thermal status {status}: throttling"
        if self.free_storage_mb is not None and self.free_storage_mb < min_free_mb:
            return f"{self.free_storage_mb:.0f} MB free on /data (minimum {min_free_mb:.0f})"
        return None


# One line per CPU: its cpufreq folder, current kHz, governor (a fixed script, no input in it).
CPUFREQ = (
    "for f in /sys/devices/system/cpu/cpu[0-9]*/cpufreq; do "
    'echo "$f $(cat $f/scaling_cur_freq) $(cat $f/scaling_governor)"; done'
)


def cpufreq(text: str) -> dict[str, Any]:
    """CPU frequencies (MHz) and the governors in use, from CPUFREQ's output."""
    freqs, governors = [], set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit():
            freqs.append(int(parts[1]) // 1000)
            governors.add(parts[2])
    return {"cpu_mhz": freqs or None, "governor": ",".join(sorted(governors)) or None}


def _field(text: str, name: str) -> str | None:
    match = re.search(rf"^\s*{re.escape(name)}:\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


def parse(battery: str, thermal: str, df: str, power: str) -> Health:
    level = _field(battery, "level")
    temperature = _field(battery, "temperature")
    powered = [_field(battery, f"{kind} powered") for kind in ("AC", "USB", "Wireless")]
    status = re.search(r"Thermal Status:\s*(\d+)", thermal)
    free = None
    lines = [line.split() for line in df.strip().splitlines()[1:]]
    if lines and len(lines[-1]) >= 4 and lines[-1][3].isdigit():
        free = int(lines[-1][3]) / 1024  # 1K blocks
    screen = None
    if "mWakefulness=" in power:
        screen = "mWakefulness=Awake" in power
    elif "Display Power: state=" in power:
        screen = "Display Power: state=ON" in power
    return Health(
        battery_level=int(level) if level and level.isdigit() else None,
        charging=None if all(p is None for p in powered) else any(p == "true" for p in powered),
        battery_temp_c=int(temperature) / 10
        if temperature and temperature.lstrip("-").isdigit()
        else None,
        thermal_status=int(status.group(1)) if status else None,
        free_storage_mb=free,
        screen_on=screen,
    )

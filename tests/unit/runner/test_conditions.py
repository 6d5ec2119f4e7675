"""Reading the host's conditions (from a stand-in /proc and /sys tree) and judging them."""

from __future__ import annotations

from pathlib import Path

from labd.config import MeasurementSettings
from labd.runner.conditions import judge
from labd_host.probe import conditions


def tree(root: Path, throttles: int, governor: str = "performance") -> Path:
    for cpu in (0, 1):
        folder = root / f"sys/devices/system/cpu/cpu{cpu}"
        (folder / "cpufreq").mkdir(parents=True, exist_ok=True)
        (folder / "thermal_throttle").mkdir(exist_ok=True)
        (folder / "cpufreq/scaling_cur_freq").write_text(f"{2_400_000 + cpu * 1000}\n")
        (folder / "cpufreq/scaling_governor").write_text(f"{governor}\n")
        (folder / "thermal_throttle/core_throttle_count").write_text(f"{throttles}\n")
    zone = root / "sys/class/thermal/thermal_zone0"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "temp").write_text("71500\n")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/loadavg").write_text("3.50 1.00 0.50 1/200 999\n")
    return root


def test_the_host_reading_has_load_frequency_governor_temperature_and_throttling(
    tmp_path: Path,
) -> None:
    found = conditions(tree(tmp_path, 4))
    assert found["load_1m"] == 3.5 and found["cpu_mhz"] == [2400, 2401]
    assert found["governor"] == "performance" and found["temperature_c"] == 71.5
    assert found["throttle_count"] == 8


def test_a_machine_without_the_files_reads_as_unknown_not_as_zero(tmp_path: Path) -> None:
    found = conditions(tmp_path)
    assert found["throttle_count"] is None and found["cpu_mhz"] is None
    assert judge(found, conditions(tmp_path), MeasurementSettings()) == []


def test_each_bad_condition_is_named(tmp_path: Path) -> None:
    before = conditions(tree(tmp_path / "a", 4))
    after = conditions(tree(tmp_path / "b", 6, "powersave"))
    limit = round(3.5 / before["cpus"] / 2, 3)  # half the load per CPU read: too busy
    policy = MeasurementSettings(max_load_per_cpu=limit, max_temperature_c=70)
    assert judge(before, after, policy) == [
        "the CPUs were thermally throttled 4 times during it",
        "the CPU governor changed during it (performance -> powersave)",
        f"load 3.50 on {before['cpus']} CPUs before it (above {limit:g} per CPU): "
        "other work competed",
        "hottest thermal zone at 71.5 °C (above 70 °C)",
    ]


def test_android_thermal_status_and_battery_are_judged() -> None:
    policy = MeasurementSettings(max_battery_temp_c=40)
    assert judge({"thermal_status": 0, "battery_temp_c": 38.0},
                 {"thermal_status": 3, "battery_temp_c": 41.5}, policy) == [
        "thermal status 3 (above 1): the device throttles",
        "battery at 41.5 °C (above 40 °C)",
    ]  # fmt: skip

"""Host stabilisation on a stand-in /sys tree: applied, recorded, restored; or why not."""

from __future__ import annotations

from pathlib import Path

from labd_host.tuning import tune


def sysfs(root: Path, governor: str = "powersave", pstate: bool = True) -> Path:
    cpu = root / "sys/devices/system/cpu"
    for n in (0, 1):
        (cpu / f"cpu{n}/cpufreq").mkdir(parents=True)
        (cpu / f"cpu{n}/cpufreq/scaling_governor").write_text(f"{governor}\n")
    if pstate:
        (cpu / "intel_pstate").mkdir()
        (cpu / "intel_pstate/no_turbo").write_text("0\n")
    return root


def test_performance_governor_and_no_turbo_are_applied_recorded_and_restored(
    tmp_path: Path,
) -> None:
    root = sysfs(tmp_path)
    tuning = tune(root)
    governor = root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
    no_turbo = root / "sys/devices/system/cpu/intel_pstate/no_turbo"
    assert governor.read_text() == "performance" and no_turbo.read_text() == "1"
    assert tuning.record == {"cpu_governor": "performance (was powersave)",
                             "turbo": "off (no_turbo 0 -> 1)"}  # fmt: skip
    assert tuning.restore() == []
    assert governor.read_text() == "powersave" and no_turbo.read_text() == "0"


def test_a_host_without_cpufreq_says_why_nothing_was_applied(tmp_path: Path) -> None:
    assert tune(tmp_path).record == {
        "cpu_governor": "not applied: no cpufreq on this host (a VM?)",
        "turbo": "not applied: no intel_pstate/no_turbo or cpufreq/boost on this host",
    }


def test_a_governor_that_cannot_be_written_is_recorded_and_nothing_is_left_changed(
    tmp_path: Path,
) -> None:
    root = sysfs(tmp_path, pstate=False)
    locked = root / "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"
    locked.unlink()
    locked.mkdir()  # writing to it fails as a read-only sysfs file would
    (locked.parent / "scaling_governor").rmdir()
    (locked.parent / "scaling_governor").symlink_to("/proc/version")
    tuning = tune(root)
    assert tuning.record["cpu_governor"].startswith("not applied:")
    first = root / "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    assert first.read_text().strip() == "powersave"

"""Host stabilisation that acts where it may (pyperf's `system tune`, Larres et al.): every CPU
on the performance governor and turbo/boost off for the job, restored afterwards. Each step is
recorded as applied, or with the reason it was not (no cpufreq in a VM, not root)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Tuning:
    """What was changed (to restore it) and what to record."""

    record: dict[str, str] = field(default_factory=dict)
    _saved: list[tuple[Path, str]] = field(default_factory=list)

    def restore(self) -> list[str]:
        """Put every changed file back; the problems met (a restore must not stop early)."""
        problems = []
        for path, old in reversed(self._saved):
            try:
                path.write_text(old)
            except OSError as e:
                problems.append(f"{path}: {e.strerror}")
        self._saved.clear()
        return problems

    def _set(self, path: Path, value: str) -> str:
        old = path.read_text().strip()
        if old != value:
            path.write_text(value)
            self._saved.append((path, old))
        return old


def tune(root: Path = Path("/")) -> Tuning:
    """Apply what this host allows; `root` is where /sys is (tests use a stand-in tree)."""
    tuning = Tuning()
    cpu_dir = root / "sys/devices/system/cpu"
    governors = sorted(cpu_dir.glob("cpu[0-9]*/cpufreq/scaling_governor"))
    if not governors:
        tuning.record["cpu_governor"] = "not applied: no cpufreq on this host (a VM?)"
    else:
        try:
            olds = {tuning._set(path, "performance") for path in governors}
            tuning.record["cpu_governor"] = f"performance (was {', '.join(sorted(olds))})"
        except OSError as e:
            tuning.restore()
            tuning.record["cpu_governor"] = f"not applied: {e.strerror} (labd is not root?)"
    tuning.record["turbo"] = _no_turbo(tuning, cpu_dir)
    return tuning


def _no_turbo(tuning: Tuning, cpu_dir: Path) -> str:
    for path, off in ((cpu_dir / "intel_pstate/no_turbo", "1"), (cpu_dir / "cpufreq/boost", "0")):
        if path.exists():
            try:
                old = tuning._set(path, off)
            except OSError as e:
                return f"not applied: {path.name}: {e.strerror} (labd is not root?)"
            return f"off ({path.name} {old} -> {off})"
    return "not applied: no intel_pstate/no_turbo or cpufreq/boost on this host"

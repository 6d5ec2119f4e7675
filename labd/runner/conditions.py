"""Judging the conditions an iteration ran under, from readings taken before and after it.

A driver reads what it can (`Driver.conditions`); this module names what was wrong, so the
iteration is flagged with the reason instead of being silently averaged with the rest
(Jetpack Macrobenchmark and Larres et al.: throttling and a busy machine show up as trends and
modes in the numbers, not as errors).
"""

from __future__ import annotations

from typing import Any

from labd.config import MeasurementSettings


def judge(before: dict[str, Any], after: dict[str, Any], policy: MeasurementSettings) -> list[str]:
    """Why an iteration's conditions were bad (empty: nothing found). Readings a device does
    not have (None or missing) are never a reason."""
    reasons: list[str] = []
    if policy.flag_thermal_throttling:
        start, end = before.get("throttle_count"), after.get("throttle_count")
        if isinstance(start, int) and isinstance(end, int) and end > start:
            reasons.append(f"the CPUs were thermally throttled {end - start} times during it")
        statuses = [r.get("thermal_status") for r in (before, after)]
        worst = max((s for s in statuses if isinstance(s, int)), default=None)
        if worst is not None and worst > policy.max_thermal_status:
            reasons.append(
                f"thermal status {worst} (above {policy.max_thermal_status}): the device throttles"
            )
    if before.get("governor") != after.get("governor"):
        reasons.append(
            f"the CPU governor changed during it ({before.get('governor')} -> "
            f"{after.get('governor')})"
        )
    load, cpus = before.get("load_1m"), before.get("cpus")
    limit = policy.max_load_per_cpu
    if limit and isinstance(load, float | int) and cpus and load / cpus > limit:
        reasons.append(
            f"load {load:.2f} on {cpus} CPUs before it (above {limit:g} per CPU): "
            "other work competed"
        )
    for key, limit, what in (
        ("temperature_c", policy.max_temperature_c, "hottest thermal zone"),
        ("battery_temp_c", policy.max_battery_temp_c, "battery"),
    ):
        hottest = max(
            (r[key] for r in (before, after) if isinstance(r.get(key), float | int)), default=None
        )
        if limit and hottest is not None and hottest > limit:
            reasons.append(f"{what} at {hottest:.1f} °C (above {limit:g} °C)")
    return reasons

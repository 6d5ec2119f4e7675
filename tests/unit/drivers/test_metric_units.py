"""Every metric a shipped scenario declares has a unit: without one, each job logs that its
results cannot go to Perfherder (the `sim` driver's `index` made a tenth of a long run's log)."""

from __future__ import annotations

from labd.sdk import DRIVER_GROUP, load_plugins


def test_every_shipped_scenario_declares_a_unit_for_each_default_metric() -> None:
    registry = load_plugins(DRIVER_GROUP)
    assert {"android", "host", "sim", "windows", "x11"} <= set(registry.classes)
    without = [
        f"{driver}/{scenario.name}: {spec.name}"
        for driver, cls in registry.classes.items()
        for scenario in cls.scenario_types
        for spec in scenario.default_metrics
        if not spec.unit
    ]
    assert without == []

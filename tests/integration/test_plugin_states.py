"""A plugin left out shows on /metrics as well as in the log: `labd_plugins` counts each
group's plugins by state, from plugins installed as pip would leave them."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from labd.events import EventBus
from labd.metrics.registry import DaemonMetrics
from labd.pool import load_drivers, load_power
from tests.integration.test_plugin_guide import example


def install(site: Path, name: str, module: str, entry_points: str) -> None:
    (site / f"{name}-1.0.dist-info").mkdir(parents=True)
    (site / f"{name}.py").write_text(module)
    (site / f"{name}-1.0.dist-info/METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
    )
    (site / f"{name}-1.0.dist-info/entry_points.txt").write_text(entry_points)


def test_refused_failed_and_disabled_plugins_are_counted_by_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    install(site, "labd_http", example(), "[labd.drivers]\nhttp = labd_http:HttpDriver\n")
    install(site, "labd_broken", "raise ImportError('no such SDK')\n",
            "[labd.drivers]\nbroken = labd_broken:Driver\n")  # fmt: skip
    boom = (
        "from labd_http import HttpDriver\n\n"
        "class BoomDriver(HttpDriver):\n"
        "    name = 'boom'\n\n"
        "    def __init__(self, *args):\n"
        "        raise RuntimeError('no relay on /dev/ttyUSB0')\n"
    )
    install(site, "labd_boom", boom, "[labd.drivers]\nboom = labd_boom:BoomDriver\n")
    monkeypatch.syspath_prepend(str(site))

    drivers = load_drivers({"host": {"enabled": False}}, "h1", "labd.toml")
    power = load_power({}, "labd.toml")
    metrics = DaemonMetrics(EventBus(), "lab", "h1")
    metrics.follow_plugins(drivers, power)

    (family,) = [
        f
        for f in text_string_to_metric_families(metrics.render().decode())
        if f.name == "labd_plugins"
    ]
    states = {
        (s.labels["plugin"], s.labels["state"]): s.value
        for s in family.samples
        if s.labels["group"] == "labd.drivers"
    }
    assert states[("broken", "refused")] == 1
    assert states[("boom", "failed")] == 1
    assert states[("host", "disabled")] == 1
    assert states[("http", "running")] == 1
    assert ("boom", "running") not in states and ("host", "running") not in states

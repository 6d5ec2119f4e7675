"""The host driver's options across upgrades: a key an earlier labd wrote in its example
configuration is said and no longer read, not refused (refused, the upgraded daemon did not
start, and systemd restarted it every 5 s: a tester's find)."""

from __future__ import annotations

from pathlib import Path

import structlog

from labd.config import load_config
from labd.pool.plugins import load_drivers


def test_the_moved_free_space_key_is_warned_about_and_the_lab_starts(tmp_path: Path) -> None:
    config = tmp_path / "labd.toml"
    config.write_text('[drivers.host]\nid = "host-a"\nmin_free_disk_mb = 500\n')
    with structlog.testing.capture_logs() as logs:
        settings = load_config(config).settings
        drivers = load_drivers(settings.drivers, "h", str(config))
    assert drivers["host"].options.id == "host-a"  # the rest of the section is read
    said = [e for e in logs if "min_free_disk_mb" in e["event"]]
    assert said and said[0]["log_level"] == "warning"
    assert "[scheduler] min_free_mb" in said[0]["hint"]

"""The host's health: free space is measured where labd keeps its jobs, not where it started."""

from __future__ import annotations

from pathlib import Path

import pytest

from labd_host.driver import HostDriver, HostOptions


async def test_free_space_is_measured_in_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An independent tester filled the state directory's disk and the host stayed
    `available`: the check measured labd's working directory (`/` under systemd)."""
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    driver = HostDriver(HostOptions(min_free_disk_mb=10**12), "h")  # more than any disk has
    driver.state_dir = state
    (device,) = await driver.discover()
    reason = await driver.health(device)
    assert reason is not None and str(state) in reason, reason
    assert str(elsewhere) not in reason
    assert Path.cwd() == elsewhere

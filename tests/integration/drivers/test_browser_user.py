"""A browser labd starts as root runs as the unprivileged user it is given (Xvfb, Chromium)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labd.sdk import Device, Policy, RunAs, RunContext
from labd_browser import PageLoad, PageLoadParams
from labd_x11 import X11Driver, X11Options
from tests.conftest import need_program


def _uids(pid: int) -> list[int]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return [int(x) for x in line.split()[1:]]
    raise AssertionError("no Uid line")


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
async def test_chromium_runs_as_nobody_not_root(xvfb: str, tmp_path: Path) -> None:
    need_program("chromium")
    try:
        nobody = RunAs.user("nobody")
    except ValueError:
        pytest.skip("no user 'nobody' here")
    device = Device(
        id="x", driver="x11", platform="x11", capabilities={"display": xvfb, "width": 640}
    )
    resources = X11Driver(X11Options(), "h").resources(device)
    ctx = RunContext("job", 1, device, tmp_path, policy=Policy(run_as=nobody), resources=resources)
    scenario = PageLoad(PageLoadParams(url="http://example.test/"), ctx)
    await scenario.setup()
    try:
        await scenario._start_browser()  # a window on the display: it runs, as whom?
        assert scenario.browser is not None and scenario.profile is not None
        assert _uids(scenario.browser.pid) == [nobody.uid] * 4  # real, effective, saved, fs
        assert scenario.profile.stat().st_uid == nobody.uid
        assert ctx.fingerprint["browser"]["run_as"].startswith("nobody (uid")
        assert ctx.fingerprint["browser"]["version"].startswith("Chromium")
    finally:
        await scenario.teardown()

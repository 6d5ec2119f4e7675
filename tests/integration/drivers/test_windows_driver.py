"""The Windows driver on Linux: everything above the Win32 calls runs for real against the
stand-in of tests/windows_standin.py (SendInput events decoded as Windows reads them, a
screen the capture process records), so the page-load scenario, the controller and labd's
capture and analysis are the ones a Windows lab runs. What needs Windows itself (user32's
SendInput, windows, the overlay, mss on the local screen) is not run here."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from labd.sdk import Policy, RunContext, check_driver
from labd_browser import PageLoad, PageLoadParams
from labd_windows import WindowsDesktop, WindowsDriver, WindowsOptions
from tests.windows_standin import BLOCKS_MS, FakeWin32

FRAME_MS = 50  # at 20 frames/s


@pytest.mark.skipif(sys.platform == "win32", reason="checks the driver off Windows")
async def test_off_windows_there_is_no_device() -> None:
    driver = WindowsDriver(WindowsOptions(), "h1")
    assert await driver.discover() == []
    assert check_driver("windows", WindowsDriver) is WindowsDriver


async def test_the_local_desktop_is_one_device_and_its_health_is_the_input_desktop(
    tmp_path: Path,
) -> None:
    api = FakeWin32(tmp_path / "screen.json", size=(1920, 1080))
    driver = WindowsDriver(WindowsOptions(id="lab-win", tags=["edge"]), "h1", api=api)
    (device,) = await driver.discover()
    assert (device.id, device.platform, device.model, device.tags) == (
        "lab-win", "windows", "1920x1080", ["edge"],
    )  # fmt: skip
    assert device.capabilities == {"width": 1920, "height": 1080}
    assert await driver.health(device) is None
    api.problem = "the session is locked: input would go nowhere"
    assert await driver.health(device) == api.problem


async def test_page_load_through_the_controller_and_sendinput(tmp_path: Path) -> None:
    api = FakeWin32(tmp_path / "screen.json")
    driver = WindowsDriver(WindowsOptions(), "h1", api=api)
    (device,) = await driver.discover()
    resources = driver.resources(device)
    # The "browser" is this Python, a program the admin's policy must list.
    policy = Policy(programs={os.path.realpath(sys.executable): sys.executable})
    ctx = RunContext("job", 1, device, tmp_path / "work", policy=policy, resources=resources)
    params = PageLoadParams(
        url="http://www.labd.test/",
        command=[sys.executable, "-c", "import time; time.sleep(120)"],  # the "browser"
        quiet_ms=400,
        fps=1000 / FRAME_MS,
        keep_video=False,
    )
    scenario = PageLoad(params, ctx)
    assert isinstance(scenario.desktop, WindowsDesktop)
    scenario.desktop.screen = api.screen  # the stand-in's screen instead of mss
    await scenario.setup()
    try:
        values = await scenario.run_iteration(0)
    finally:
        await scenario.teardown()
    # The controller's user actions, as SendInput events reached "Windows":
    (focus, green_url, enter, url, enter_again) = api.actions
    assert (focus, enter, enter_again) == (("key", "ctrl+l"), ("key", "return"), ("key", "return"))
    assert green_url[0] == "text" and "background:#00ff00" in unquote(green_url[1])
    assert url == ("text", "http://www.labd.test/")
    # What the user saw, measured from the frames labd captured (one frame of granularity;
    # the upper bound allows for a late frame on a loaded machine):
    first, last = BLOCKS_MS[0], BLOCKS_MS[-1]
    assert first <= values["first_visual_change_ms"] <= first + 3 * FRAME_MS
    assert last <= values["visually_complete_ms"] <= last + 3 * FRAME_MS
    assert values["last_visual_change_ms"] == values["visually_complete_ms"]
    assert values["sync_confidence"] > 0.9
    fingerprint = ctx.fingerprint
    assert fingerprint["stabilisation"]["browser_cpus"] is None  # not applied on Windows
    assert fingerprint["browser"]["command"] == sys.executable

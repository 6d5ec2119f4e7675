"""A browser the page-load scenario started leaves no process behind: after a normal teardown,
and after the browser itself crashed (its helpers are ended with it). Xvfb, real browsers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from labd.sdk import Device, Policy, RunContext
from labd_browser import PageLoad, PageLoadParams
from labd_x11 import X11Driver, X11Options
from tests.conftest import need_program, process_alive


def _tree(root: int) -> list[int]:
    """Every process below root (the browser's helpers), from /proc."""
    children: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ppid = int((proc / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(proc.name))
    found, queue = [], [root]
    while queue:
        for pid in children.get(queue.pop(), []):
            found.append(pid)
            queue.append(pid)
    return found


@pytest.mark.parametrize("crash", [False, True], ids=["teardown", "after-a-crash"])
@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_no_browser_process_outlives_the_scenario(
    xvfb: str, tmp_path: Path, browser: str, crash: bool
) -> None:
    need_program("chromium" if browser == "chromium" else "firefox-esr")
    device = Device(
        id="x", driver="x11", platform="x11", capabilities={"display": xvfb, "width": 640}
    )
    resources = X11Driver(X11Options(), "h").resources(device)
    ctx = RunContext("job", 1, device, tmp_path, policy=Policy(), resources=resources)
    scenario = PageLoad(PageLoadParams(url="http://example.test/", browser=browser), ctx)
    await scenario.setup()
    try:
        await scenario._start_browser()  # a window on the display, helpers started
        assert scenario.browser is not None
        main = scenario.browser.pid
        helpers = _tree(main)
        assert helpers  # both browsers run several processes
        if crash:  # the main process dies alone; its helpers are still there
            os.kill(main, signal.SIGKILL)
            scenario.browser.wait(10)
    finally:
        await scenario.teardown()
    assert [pid for pid in [main, *helpers] if process_alive(pid)] == []

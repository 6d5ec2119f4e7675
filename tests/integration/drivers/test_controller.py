"""The platform-neutral controller on a real X11 display and on the Android stand-in."""

from __future__ import annotations

import asyncio
from urllib.parse import unquote

from labd.sdk import Controller, color_page
from labd_android import AndroidDriver, AndroidOptions, PersistentShell
from labd_android.input import AndroidInput
from labd_x11 import X11Input
from tests.adb_standin import AdbStandIn, FakeDevice
from tests.integration.drivers.test_x11_input import Recorder


async def test_desktop_actions_become_x11_events(xvfb: str) -> None:
    recorder = Recorder(xvfb)
    x11 = X11Input(xvfb)
    try:
        controller = Controller(x11, (640, 480))
        await controller.load_url("http://例え.jp/日本?q=a b")
        await controller.tap(30, 40)
        await controller.swipe(0, 250)
        await controller.swipe(-100, 0)
        x11.key("F12")
        events = recorder.until("F12")
    finally:
        x11.close()
        recorder.close()
    keys = [e for e in events if e["type"] == "key" and e["name"] not in ("Control_L", "Shift_L")]
    assert (keys[0]["name"], keys[0]["ctrl"]) == ("l", True)
    # the same address in ASCII: no keycode remapped while a URL bar takes it
    typed = "http://xn--r8jz45g.jp/%E6%97%A5%E6%9C%AC?q=a b"
    assert "".join(k["char"] or "" for k in keys[1:-2]) == typed
    assert keys[-2]["name"] == "Return"
    presses = [(e["button"], e["x"], e["y"]) for e in events if e["type"] == "press"]
    # a click, 2 wheel clicks down, one left (button 6: horizontal, not 4 or 5)
    assert presses == [(1, 30, 40), (5, 30, 40), (5, 30, 40), (6, 30, 40)]


def test_touch_actions_become_android_input() -> None:
    adb = AdbStandIn()
    try:
        device = adb.add(FakeDevice("emulator-5554"))
        driver = AndroidDriver(AndroidOptions(adb_port=adb.port), "h1")
        keys = AndroidInput(PersistentShell(driver.adb_device(device.serial)))
        controller = Controller(keys, (1080, 2400), url_bar=(540, 150))

        async def act() -> None:
            await controller.load_url("https://site.test/")
            await controller.tap(100, 200)
            await controller.swipe(0, 600)

        asyncio.run(act())
    finally:
        adb.close()
    assert device.received[1:] == [
        ["cmd", "input", "tap", "540", "150"],
        ["cmd", "input", "text", "https://site.test/"],
        ["cmd", "input", "keyevent", "66"],
        ["cmd", "input", "tap", "100", "200"],
        ["cmd", "input", "swipe", "540", "1200", "540", "600", "300"],
    ]


def test_the_sync_screen_is_a_page_of_one_colour() -> None:
    url = color_page((0, 255, 0))
    assert url.startswith("data:text/html;charset=utf-8,")  # a typed URL is sent in UTF-8
    assert "background:#00ff00" in unquote(url)
    assert "#" not in url  # a raw '#' would end the data: URL (a fragment)

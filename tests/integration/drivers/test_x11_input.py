"""X11 input through XTEST, checked by a real X client that records what it receives (Xvfb)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog
from pydantic import ValidationError

from labd.errors import InfrastructureError, UsageError
from labd.model import Device
from labd.sdk import keep_latencies, latency_values, take_latencies
from labd_x11 import X11Driver, X11Input, X11Options


class Recorder:
    """The recording X client in its own process; its events read on a thread."""

    def __init__(self, display: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.xrecorder", display], stdout=subprocess.PIPE, text=True
        )
        self.queue: queue.Queue[dict[str, Any]] = queue.Queue()
        assert self.process.stdout is not None
        self.ready = json.loads(self.process.stdout.readline())
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.queue.put(json.loads(line))

    def events(self, count: int, timeout: float = 10) -> list[dict[str, Any]]:
        return [self.queue.get(timeout=timeout) for _ in range(count)]

    def until(self, name: str, timeout: float = 10) -> list[dict[str, Any]]:
        """Events up to and including the key press named `name`."""
        out = []
        while not out or out[-1].get("name") != name:
            out.append(self.queue.get(timeout=timeout))
        return out

    def close(self) -> None:
        self.process.kill()
        self.process.wait()




def test_text_arrives_exactly_metacharacters_and_unicode_included(
    desktop: tuple[X11Input, Recorder],
) -> None:
    x11, recorder = desktop
    text = "; rm -rf / `id` $(id) 'q' \"d\" \\ | & > <\nünïcødé €→ 日本 🙂"
    x11.text(text)
    x11.key("F12")  # the end
    events = recorder.until("F12")
    chars = "".join(e["char"] or "" for e in events if e["type"] == "key")
    assert chars == text


def test_key_combinations(desktop: tuple[X11Input, Recorder]) -> None:
    x11, recorder = desktop
    x11.key("ctrl+l")
    x11.key("Return")
    keys = [e for e in recorder.events(3) if e["type"] == "key"]
    assert [(k["name"], k["ctrl"]) for k in keys] == [
        ("Control_L", False),
        ("l", True),
        ("Return", False),
    ]
    with pytest.raises(UsageError, match="unknown modifier 'hyper'"):
        x11.key("hyper+x")
    with pytest.raises(UsageError, match="no key named 'NoSuchKey'"):
        x11.key("NoSuchKey")


def test_mouse_click_drag_and_scroll(desktop: tuple[X11Input, Recorder]) -> None:
    x11, recorder = desktop
    x11.click(100, 120)
    events = recorder.events(3)
    assert events[0] == {**events[0], "type": "motion", "x": 100, "y": 120}
    assert [(e["type"], e["button"], e["x"], e["y"]) for e in events[1:]] == [
        ("press", 1, 100, 120), ("release", 1, 100, 120),
    ]  # fmt: skip
    x11.drag(10, 10, 110, 60, duration_s=0.05, steps=5)
    events = recorder.events(8)
    assert events[1]["type"] == "press" and events[-1]["type"] == "release"
    assert (events[-2]["x"], events[-2]["y"]) == (110, 60)
    x11.scroll("down", 2)
    assert [e["button"] for e in recorder.events(4)] == [5, 5, 5, 5]


def test_window_lookup_by_name_and_class(desktop: tuple[X11Input, Recorder]) -> None:
    x11, recorder = desktop
    window = x11.find_window(name="input recorder")
    assert window is not None and window.id == recorder.ready["window"]
    assert x11.find_window(wm_class="LabdRecorder") == window
    assert (window.width, window.height) == (640, 480)
    assert x11.find_window(name="no such window") is None


def test_a_display_that_cannot_be_opened() -> None:
    with pytest.raises(InfrastructureError, match="X11 display ':4243': cannot open it"):
        X11Input(":4243")


async def test_driver_offers_reachable_displays_and_says_which_it_cannot(xvfb: str) -> None:
    """A display of the configuration that does not exist was left out without a word."""
    driver = X11Driver(X11Options(displays=[xvfb, ":4244"]), "h1")
    with structlog.testing.capture_logs() as logs:
        devices = await driver.discover()
        await driver.discover()  # said once, not at every discovery
    assert [d.capabilities["display"] for d in devices] == [xvfb]
    assert devices[0].model == "640x480"
    said = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["display"], e["error"][:37]) for e in said] == [
        (":4244", "X11 display ':4244': cannot open it (")
    ]
    assert await driver.health(devices[0]) is None
    gone = Device(id="x", driver="x11", platform="x11", capabilities={"display": ":4244"})
    assert (await driver.health(gone) or "").startswith("X11 display ':4244': cannot open it")


async def test_an_xvfb_labd_started_that_stops_is_started_again_on_its_display() -> None:
    """A tester killed the Xvfb labd had started: its device stayed offline until labd was
    restarted, and its queued job waited."""
    driver = X11Driver(X11Options(xvfb=["320x240"]), "h1")
    try:
        (device,) = await driver.discover()
        process, display = driver.servers[0]
        process.kill()
        process.wait(10)
        assert (await driver.health(device) or "").startswith(
            f"X11 display {display!r}: cannot open it"
        )
        assert [d.id for d in await driver.discover()] == [device.id]  # the same display
        assert driver.servers[0][0].poll() is None
        assert await driver.health(device) is None
    finally:
        await driver.close()


def test_xvfb_sizes_are_checked_with_the_configuration() -> None:
    for size in ("abc", "0x0", "1280x800x24", "99999x10"):
        with pytest.raises(ValidationError, match=f"'{size}' is not a screen size"):
            X11Options(xvfb=[size])


def test_every_dispatch_is_timed_and_kept_with_the_iteration(
    desktop: tuple[X11Input, Recorder], tmp_path: Path
) -> None:
    """One figure per dispatch (events up to the sync's reply), stored as values and a file."""
    x11, recorder = desktop
    x11.click(5, 5)
    x11.drag(10, 10, 50, 50, duration_s=0.01, steps=3)  # press, 3 moves, release
    x11.scroll("down")
    x11.key("ctrl+l")
    x11.text("ab", delay_ms=1)  # one dispatch per key when paced
    x11.text("cd")  # one dispatch for the lot
    recorder.until("d")
    latencies = take_latencies(x11)
    assert len(latencies) == 1 + 5 + 1 + 1 + 2 + 1
    assert all(0 < v < 1000 for v in latencies)
    assert take_latencies(x11) == []  # taken: the next iteration starts empty
    fingerprint: dict[str, Any] = {"artifacts": {"video": "v.webm"}}
    values = keep_latencies(latencies, tmp_path, fingerprint)
    assert values == latency_values(latencies)
    assert values["input_latency_p50_ms"] <= values["input_latency_p95_ms"]
    kept = json.loads(Path(fingerprint["artifacts"]["input_latency"]).read_text())
    assert kept["dispatch"] == pytest.approx(latencies, abs=1e-3)
    assert fingerprint["artifacts"]["video"] == "v.webm"

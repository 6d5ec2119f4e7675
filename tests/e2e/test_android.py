"""The Android lab end to end, with no phone: a real daemon whose Android driver talks to the
adb stand-in (tests/adb_standin.py, the adb host protocol on loopback) and its stand-in phone
(tests/android_phone.py: a scripted scrolling scene, screenrecord as H.264 through ffmpeg,
`cmd input`, `am`, `adb reverse` and `adb forward`). Every Android scenario is submitted over
MQTT from the CLI as CI would, its events followed on the broker, its results read back.

What this cannot show is how a real phone behaves: docs/devices.md says what to check on one.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import pytest

from tests.adb_standin import AdbStandIn
from tests.android_phone import Phone
from tests.conftest import need_program, need_service
from tests.e2e.test_first_run import free_port, labd, start_bare_daemon
from tests.e2e.test_page_load import run_job
from tests.markers_log import OFFSETS

ROOT = Path(__file__).parents[2]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[dict[str, Any]]:
    need_program("ffmpeg")
    need_service("mosquitto", "127.0.0.1", 1883)
    adb = AdbStandIn()
    phone = adb.add(Phone(jank_every=6))
    name = f"e2e-android-{uuid.uuid4().hex[:8]}"
    archives = tmp_path / "archives"
    (archives / "examples/page").mkdir(parents=True)
    shutil.copy(ROOT / "examples/page/site.har", archives / "examples/page")
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "{name}"\nstate_dir = "{tmp_path / "state"}"\n'
        f"[http]\nport = {free_port()}\napi_port = {free_port()}\n"
        f"[drivers.android]\nadb_port = {adb.port}\n[drivers.host]\nenabled = false\n"
        f'[replay]\narchive_dir = "{archives}"\n'
    )
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin:" + str(Path(sys.executable).parent),
        "LABD_CONFIG": str(config),
        "HOME": str(tmp_path),
    }
    daemon = start_bare_daemon(env, tmp_path)
    yield {"env": env, "cwd": tmp_path, "name": name, "phone": phone, "dir": tmp_path}
    daemon.terminate()
    assert daemon.wait(60) == 0
    adb.close()


def shorter(lab: dict[str, Any], manifest: str, iterations: int = 2) -> str:
    """The example manifest with fewer iterations (the machine is shared)."""
    text = (ROOT / manifest).read_text()
    text = text.replace("iterations = 5", f"iterations = {iterations}")
    path = Path(lab["dir"]) / Path(manifest).name
    path.write_text(text.replace("warmup = 1", "warmup = 0"))
    return str(path)


def succeeded(results: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert results["job"]["state"] == "succeeded", results["job"]["error"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    measured = [i for i in results["iterations"] if not i["warmup"] and not i["error"]]
    assert measured and not any(i["set_aside"] for i in measured)
    return measured


async def test_every_android_scenario_over_mqtt(lab: dict[str, Any]) -> None:
    phone: Phone = lab["phone"]
    results, events = await run_job(lab, shorter(lab, "examples/android/gestures.toml"))
    for iteration in succeeded(results, events):
        values = iteration["values"]
        assert values["janky_frames"] >= 1  # the stand-in repeats every 6th moving frame
        assert 20 <= values["unique_fps"] <= 33 and values["checkerboard_percent"] > 0
        assert values["input_latency_p50_ms"] > 0
        artifacts = iteration["fingerprint"]["artifacts"]
        assert cv2.VideoCapture(artifacts["video"]).read()[0]
        assert Path(artifacts["heatmap"]).is_file() and Path(artifacts["input_latency"]).is_file()

    results, events = await run_job(lab, shorter(lab, "examples/android/page-load-chrome.toml"))
    for iteration in succeeded(results, events):
        values = iteration["values"]
        assert 450 <= values["visually_complete_ms"] <= 2000
        assert values["browser.load"] > 0  # Navigation Timing through adb forward
        assert iteration["fingerprint"]["network"]["name"] == "none"
    assert phone.proxy == ""  # the job took its proxy off the phone

    results, events = await run_job(lab, shorter(lab, "examples/android/app-launch.toml"))
    for iteration in succeeded(results, events):
        # Raptor's marks as the stand-in logs them (the seed's offsets), read from logcat.
        assert iteration["values"]["coldlaunch.fullyLoaded"] == OFFSETS["fullyLoaded"]
        assert iteration["values"]["coldlaunch.visuallyLoaded"] == OFFSETS["visuallyLoaded"]
    started = [a for a in phone.received if a[:3] == ["am", "start", "-W"]]
    assert len(started) == 2 + 2  # two gesture iterations, two launches


async def test_a_page_that_does_not_load_fails_naming_why(lab: dict[str, Any]) -> None:
    """Chrome's error page for a server that is not there was measured as the page."""
    manifest = Path(shorter(lab, "examples/android/page-load-chrome.toml", iterations=1))
    url = f"http://127.0.0.1:{free_port()}/"  # nothing listens: refused
    text = manifest.read_text().replace('"http://www.labd.test/"', f'"{url}"')
    network = text[text.index("[network]") : text.index("[device]")]
    manifest.write_text(text.replace(network, ""))  # fetched by the phone itself
    results, _ = await run_job(lab, str(manifest), succeeds=False)
    (iteration,) = results["iterations"]
    assert iteration["error"].endswith(
        f"{url} did not load: Chromium shows its error page (ERR_CONNECTION_REFUSED) at {url}"
    )
    assert results["job"]["state"] == "failed"


async def test_a_load_event_after_the_screen_went_still_is_waited_for(
    lab: dict[str, Any],
) -> None:
    """The page was drawn, then still for quiet_ms (1 s) while its load event was 3 s off: the
    iteration ended before it, and `browser.load` was missing."""
    lab["phone"].load_lag_ms = 3000
    manifest = shorter(lab, "examples/android/page-load-chrome.toml", iterations=1)
    results, events = await run_job(lab, manifest)
    (iteration,) = succeeded(results, events)
    assert iteration["values"]["browser.load"] >= 3000


async def test_a_page_too_busy_to_answer_at_first_is_asked_again_until_it_loads(
    lab: dict[str, Any],
) -> None:
    """A page of megabytes holds its script while it parses: Chrome took more than 5 s to
    answer. That was read as nothing answering, and `browser.load` was missing."""
    lab["phone"].busy_ms = 6000
    manifest = shorter(lab, "examples/android/page-load-chrome.toml", iterations=1)
    results, events = await run_job(lab, manifest)
    (iteration,) = succeeded(results, events)
    assert iteration["values"]["browser.load"] > 0


async def test_a_pinch_is_refused_at_submit_with_the_reason(lab: dict[str, Any]) -> None:
    manifest = Path(shorter(lab, "examples/android/gestures.toml"))
    manifest.write_text(manifest.read_text() + '\n[[params.steps]]\nkind = "pinch"\nscale = 2\n')
    done = labd(lab["env"], lab["cwd"], "submit", str(manifest), "--wait")
    assert done.returncode != 0
    assert "pinch needs two pointers" in done.stderr + done.stdout
    assert json.loads(labd(lab["env"], lab["cwd"], "jobs", "list", "--json").stdout)["jobs"] == []

"""The page-load lab end to end: a real daemon with its own Xvfb, jobs submitted over MQTT
from the CLI as CI would, Chromium and Firefox from Debian's packages loading the example page
through the replay server under the "none" and "3g" profiles, the frames captured and analysed,
events followed on MQTT, results compared."""

from __future__ import annotations

import asyncio
import json
import shutil
import statistics
import sys
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import cv2
import pytest

from labd.replay.har import har_document, har_entry
from tests.conftest import need_program, need_service
from tests.e2e.test_first_run import free_port, labd, start_bare_daemon

ROOT = Path(__file__).parents[2]
THREE_G_RTT_MS = 300
# Six loads, each filmed and encoded: a minute on a quiet 2-core machine, several with a
# CPU burner beside it (the --wait and the event stream give the job as long).
JOB_WITHIN_S = 600
BAD_PAGES = [  # served by the replay server like any recorded page
    har_entry("GET", f"http://www.labd.test/{path}", [], b"", 200, "OK",
              [("Content-Type", "text/html")], html.encode(), "", 1)
    for path, html in {
        "endless": "<script>setInterval(() => document.body.textContent = Date.now(), 30)</script>",
        "red": "<html style='background: #ff0000; height: 100%'><body>all red</body></html>",
    }.items()
]  # fmt: skip


@pytest.fixture
def lab(tmp_path: Path) -> dict[str, Any]:
    need_program("Xvfb")
    need_service("mosquitto", "127.0.0.1", 1883)
    name = f"e2e-page-{uuid.uuid4().hex[:8]}"
    archives = tmp_path / "archives"
    (archives / "examples/page").mkdir(parents=True)
    shutil.copy(ROOT / "examples/page/site.har", archives / "examples/page")
    (archives / "bad.har").write_text(json.dumps(har_document(BAD_PAGES, "test")))
    config = tmp_path / "labd.toml"
    api_port = free_port()
    config.write_text(
        f'[daemon]\nlab = "{name}"\nstate_dir = "{tmp_path / "state"}"\n'
        f"[http]\nport = {free_port()}\napi_port = {api_port}\n"
        '[drivers.x11]\nxvfb = ["1280x800"]\n[drivers.host]\nenabled = false\n'
        f'[replay]\narchive_dir = "{archives}"\n'
    )
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin:" + str(Path(sys.executable).parent),
        "LABD_CONFIG": str(config),
        "HOME": str(tmp_path),
    }
    daemon = start_bare_daemon(env, tmp_path)
    yield {"env": env, "cwd": tmp_path, "name": name, "api_port": api_port,
           "state": tmp_path / "state"}  # fmt: skip
    daemon.terminate()
    assert daemon.wait(60) == 0


async def run_job(
    lab: dict[str, Any], manifest: str, succeeds: bool = True
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Submit over MQTT with the CLI; collect the job's events from the broker meanwhile."""
    job_id = uuid.uuid4().hex[:12]
    events: list[dict[str, Any]] = []
    async with aiomqtt.Client("127.0.0.1", 1883, identifier=f"watch-{job_id}") as client:
        await client.subscribe(f"labd/v1/{lab['name']}/jobs/{job_id}/events", qos=1)

        async def until_finished() -> None:
            async for message in client.messages:
                assert isinstance(message.payload, bytes)
                events.append(json.loads(message.payload))
                if events[-1]["kind"] == "finished":
                    return

        submit = asyncio.create_task(
            asyncio.to_thread(
                labd,
                lab["env"],
                lab["cwd"],
                "submit",
                str(ROOT / manifest),
                "--id",
                job_id,
                "--wait",
                timeout=JOB_WITHIN_S,
            )
        )
        finished = asyncio.create_task(until_finished())
        async with asyncio.timeout(JOB_WITHIN_S):
            await asyncio.wait({submit, finished}, return_when=asyncio.FIRST_COMPLETED)
            # A job that ran and failed says so on its events within moments; one that was
            # refused never will: its words, not a long wait for events.
            refused = (
                not finished.done()
                and (done := submit.result()).returncode != 0
                and not (await asyncio.wait({finished}, timeout=30))[0]
            )
            if refused:
                finished.cancel()
                raise AssertionError(f"submit exit {done.returncode}: {done.stderr}")
            await finished
        done = await submit
    assert (done.returncode == 0) == succeeds, done.stderr or done.stdout
    results = json.loads(
        labd(lab["env"], lab["cwd"], "jobs", "results", job_id, "--format", "json").stdout
    )
    return results, events


def tolerant(lab: dict[str, Any], example: str) -> str:
    """The README's example manifest, keeping iterations whose capture dropped frames. This
    test is about the pipeline (MQTT, the shaped replay server, capture, analysis, compare);
    on a CI machine busy with other work the capture drops frames, and by default every
    iteration would rightly be set aside (test_page_load_trust.py checks that rule)."""
    text = (ROOT / "examples/page" / example).read_text()
    assert text.count("[params]\n") == 1, example
    copy = lab["cwd"] / example
    copy.write_text(text.replace("[params]\n", "[params]\nmax_dropped_frames = 100000\n", 1))
    return str(copy)


def bad_page_manifest(page: str, *params: str) -> str:
    """One iteration of a page from bad.har on Chromium."""
    text = (ROOT / "examples/page/chromium-none.toml").read_text()
    for line in params:
        text = text.replace("load_timeout_s = 60", line)
    return (
        text.replace('url = "http://www.labd.test/"', f'url = "http://www.labd.test/{page}"')
        .replace("examples/page/site.har", "bad.har")
        .replace("iterations = 5", "iterations = 1")
        .replace("warmup = 1", "warmup = 0")
    )


def check_video_over_the_api(lab: dict[str, Any], results: dict[str, Any]) -> None:
    """A video the runner wrote, fetched from the API as CI would, plays: whole, and from
    a byte range (as a seeking player asks)."""
    import tomllib
    import urllib.request

    token = tomllib.loads((lab["state"] / "credentials/local.toml").read_text())["token"]
    (video,) = [a for a in results["artefacts"] if a["kind"] == "video"][-1:]
    url = f"http://127.0.0.1:{lab['api_port']}{video['path']}"
    ranged = {"Authorization": f"Bearer {token}", "Range": "bytes=0-99"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=ranged), timeout=20) as part:
        assert part.status == 206 and len(part.read()) == 100
    whole = {"Authorization": f"Bearer {token}"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=whole), timeout=20) as answer:
        body = answer.read()
    assert len(body) == video["size"]
    copy = lab["cwd"] / "fetched.webm"
    copy.write_bytes(body)
    playback = cv2.VideoCapture(str(copy))
    frames = 0
    while playback.read()[0]:
        frames += 1
    assert frames > 10, f"the fetched video has {frames} frames"


def measured(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in results["iterations"] if not i["warmup"] and not i["error"]]


def check_job(results: dict[str, Any], events: list[dict[str, Any]]) -> list[float]:
    assert results["job"]["state"] == "succeeded", results["job"]["error"]
    iterations = measured(results)
    assert len(iterations) >= 5
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # in order, no gaps
    # Each measured iteration's video is among the job's artefacts the API lists.
    videos = {a["name"] for a in results["artefacts"] if a["content_type"] == "video/webm"}
    assert {f"iteration-{i['index']}/video.webm" for i in iterations} <= videos
    for iteration in iterations:
        assert iteration["values"]["sync_confidence"] > 0.95
        assert iteration["values"]["browser.load"] > 0  # the browser's own marks, beside
        # Every XTEST dispatch of the iteration (green page URL, page URL, Enter), kept.
        latency = iteration["values"]
        assert 0 < latency["input_latency_p50_ms"] <= latency["input_latency_p95_ms"]
        kept = json.loads(Path(iteration["fingerprint"]["artifacts"]["input_latency"]).read_text())
        assert len(kept["dispatch"]) > len("http://www.labd.test/")
        video = iteration["fingerprint"]["artifacts"]["video"]
        playback = cv2.VideoCapture(video)
        assert playback.read()[0], f"{video} does not play"
        assert int(playback.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little") == b"VP80"
    return [i["values"]["visually_complete_ms"] for i in iterations]


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_page_load_over_mqtt_under_two_profiles(lab: dict[str, Any], browser: str) -> None:
    need_program("chromium" if browser == "chromium" else "firefox-esr")
    fast_results, fast_events = await run_job(lab, tolerant(lab, f"{browser}-none.toml"))
    slow_results, slow_events = await run_job(lab, tolerant(lab, f"{browser}-3g.toml"))
    fast = check_job(fast_results, fast_events)
    slow = check_job(slow_results, slow_events)
    await asyncio.to_thread(check_video_over_the_api, lab, slow_results)
    # A new connection and the page's request cost two round trips at least.
    assert statistics.median(slow) - statistics.median(fast) >= 2 * THREE_G_RTT_MS
    # The browser's Navigation Timing sees the round trips too (a second source, same story).
    first_byte = [
        statistics.median(i["values"]["browser.responseStart"] for i in measured(results))
        for results in (fast_results, slow_results)
    ]
    assert first_byte[1] - first_byte[0] >= THREE_G_RTT_MS
    assert slow_results["iterations"][-1]["fingerprint"]["network"]["name"] == "3g"
    compared = labd(
        lab["env"],
        lab["cwd"],
        "compare",
        fast_results["job"]["id"],
        slow_results["job"]["id"],
        "--json",
    )
    # Once, on a loaded machine, this printed nothing and the test said only that JSON was
    # missing: say what the command said instead.
    assert compared.stdout.strip(), f"exit {compared.returncode}: {compared.stderr}"
    verdicts = {m["metric"]: m["verdict"] for m in json.loads(compared.stdout)["metrics"]}
    assert verdicts["visually_complete_ms"] == "regression"


async def test_a_page_that_never_settles_times_out_its_iteration(
    lab: dict[str, Any], tmp_path: Path
) -> None:
    need_program("chromium")
    manifest = tmp_path / "endless.toml"
    manifest.write_text(bad_page_manifest("endless", "load_timeout_s = 5"))
    results, _ = await run_job(lab, str(manifest), succeeds=False)
    assert results["job"]["state"] == "failed"
    (iteration,) = results["iterations"]
    # Its load event fired at once; its screen never came to rest.
    assert "the page loaded but did not come to rest within 5 s" in iteration["error"]
    devices = json.loads(labd(lab["env"], lab["cwd"], "devices", "list", "--json").stdout)[
        "devices"
    ]
    assert [d["state"] for d in devices] == ["available"]


async def test_a_page_that_shows_red_itself_fails_its_iteration(
    lab: dict[str, Any], tmp_path: Path
) -> None:
    """A page drawn in the end colour would end the clock early: labd tells it from its own red
    screen by time and fails the iteration with the reason, not a wrong number."""
    need_program("chromium")
    manifest = tmp_path / "red.toml"
    manifest.write_text(bad_page_manifest("red"))
    results, _ = await run_job(lab, str(manifest), succeeds=False)
    assert results["job"]["state"] == "failed"
    (iteration,) = results["iterations"]
    assert "the page showed the end colour itself" in iteration["error"]
    assert "before labd's red screen" in iteration["error"]
    devices = json.loads(labd(lab["env"], lab["cwd"], "devices", "list", "--json").stdout)[
        "devices"
    ]
    assert [d["state"] for d in devices] == ["available"]

"""The complete driver of docs/plugins.md, taken from the page as it stands, installed as a
plugin (a dist-info with its entry point, as pip would leave it) and run through labd's own
loader, pool interface and runner against a local HTTP server: the guide's example works."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from labd.errors import ConfigError
from labd.events import EventBus
from labd.model import JobState, TestSpec
from labd.pool import load_drivers
from labd.runner import run_job
from labd.sdk import DRIVER_GROUP, load_plugins
from labd.store import Store, results_view

GUIDE = Path(__file__).parents[2] / "docs/plugins.md"
MARKER = "<!-- the example: tests/integration/test_plugin_guide.py runs the next python block -->"


def example() -> str:
    text = GUIDE.read_text()
    found = re.search(re.escape(MARKER) + r"\n```python\n(.*?)\n```\n", text, re.DOTALL)
    assert found, "docs/plugins.md lost its example"
    return found.group(1) + "\n"


class Appliance(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status = 200 if self.path in ("/", "/status") else 404
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def appliance() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Appliance)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The example installed as a plugin of its own: its module and its entry point."""
    site = tmp_path / "site"
    (site / "labd_http-1.0.dist-info").mkdir(parents=True)
    (site / "labd_http.py").write_text(example())
    (site / "labd_http-1.0.dist-info/METADATA").write_text(
        "Metadata-Version: 2.1\nName: labd-http\nVersion: 1.0\n"
    )
    (site / "labd_http-1.0.dist-info/entry_points.txt").write_text(
        "[labd.drivers]\nhttp = labd_http:HttpDriver\n"
    )
    monkeypatch.syspath_prepend(str(site))


async def test_the_guide_s_driver_loads_discovers_and_runs(
    installed: None, appliance: str, tmp_path: Path
) -> None:
    assert example().count("\n") < 90  # the page promises about 60 lines of code
    registry = load_plugins(DRIVER_GROUP)
    assert "http" in registry.classes and registry.refused == {}
    section = {"devices": {"router-1": appliance}}
    drivers = load_drivers({"http": section, "host": {"enabled": False}}, "h1", "labd.toml")
    driver = drivers["http"]
    (device,) = await driver.discover()
    assert (device.id, device.platform) == ("router-1", "http")
    assert await driver.health(device) is None

    store = await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}")
    try:
        outcomes = {}
        for path in ("/status", "/missing"):
            spec = TestSpec.model_validate(
                {"suite": "s", "test": "t", "scenario": "http-get", "iterations": 3,
                 "warmup": 0, "params": {"path": path}}
            )  # fmt: skip
            job, _ = await store.submit_job(f"job{len(outcomes)}", spec, "me")
            job = job.model_copy(update={"attempts": 1, "device_id": device.id})
            params = driver.scenarios()["http-get"].Params.model_validate(spec.params)
            outcome = await run_job(
                job, device, driver, params, store, EventBus(), tmp_path / job.id
            )
            outcomes[path] = (outcome, await results_view(store, job))
    finally:
        await store.close()
    outcome, results = outcomes["/status"]
    assert outcome.state is JobState.SUCCEEDED
    assert [i["values"]["response_ms"] > 0 for i in results["iterations"]] == [True] * 3
    outcome, _ = outcomes["/missing"]
    assert outcome.state is JobState.FAILED and "GET /missing: HTTP 404" in outcome.error


def test_its_options_are_checked_like_labd_s_own(installed: None) -> None:
    with pytest.raises(ConfigError) as caught:
        load_drivers({"http": {"devices": {"r": "http://x"}, "timeout_s": 0}}, "h1", "labd.toml")
    assert caught.value.problems == [
        "labd.toml: drivers.http.timeout_s: input should be greater than 0, got 0"
    ]


async def test_a_device_that_does_not_answer_is_unhealthy(installed: None) -> None:
    drivers = load_drivers({"http": {"devices": {"r": "http://127.0.0.1:9"}}}, "h", "labd.toml")
    (device,) = await drivers["http"].discover()
    assert (await drivers["http"].health(device) or "").startswith(
        "no answer from http://127.0.0.1:9: "
    )

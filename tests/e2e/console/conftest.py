"""A lab for the console's tests: a real `labd run` with principals of every role that has run
real jobs (commands on the host at two revisions of two tests, and, where Xvfb and chromium
are installed, a page load on an X11 display that kept a video), and Debian's chromium driven
by Playwright (never a browser Playwright downloads)."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import time
import tomllib
import urllib.parse
import uuid
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REQUIRE_SERVICES, TEST_PROGRAMS, LabdProcess

ROOT = Path(__file__).parents[3]
ROLES = ("viewer", "submitter", "admin")
TOKENS = {role: f"console-{role}-{uuid.uuid4().hex}" for role in ROLES}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Screenshots a person can look at after the run (ignored by git).
ARTIFACTS = Path(os.environ.get("LABD_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "console"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    text: str


@dataclass
class Lab:
    daemon: LabdProcess
    jobs: dict[str, str] = field(default_factory=dict)  # what -> job id
    page_load: str | None = None  # a page-load job that kept a video, when one could run

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.daemon.port}"

    def http(
        self,
        method: str,
        path: str,
        cookie: str = "",
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """One request to the side port exactly as given (no redirect followed)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.daemon.port, timeout=30)
        sent = dict(headers or {})
        if cookie:
            sent["Cookie"] = f"labd_console_{self.daemon.port}={cookie}"
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form).encode()
            sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode(errors="replace")
            return Answer(response.status, dict(response.getheaders()), text)
        finally:
            conn.close()

    def sign_in(self, role: str) -> str:
        """A session for `role` (its cookie value), signed in as a browser would."""
        answer = self.http(
            "POST", "/console/login", form={"token": TOKENS[role]}, headers={"Origin": self.base}
        )
        assert answer.status == 303, answer
        cookie = answer.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        return cookie.split(";")[0].split("=", 1)[1]

    def submit(self, job_id: str, spec: dict[str, Any], token: str | None = None) -> None:
        self.daemon.api_token = token
        try:
            status, answer = self.daemon.post("/api/v1/jobs", {"id": job_id, "spec": spec})
        finally:
            self.daemon.api_token = None
        assert status == 201, answer

    def wait(self, job_id: str, states: tuple[str, ...] = ("succeeded",), timeout: float = 300):
        deadline = time.monotonic() + timeout
        while (state := self.state(job_id)) not in states:
            if state in ("succeeded", "failed", "cancelled", "timed_out"):
                error = self.daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]["error"]
                raise AssertionError(f"job {job_id} ended {state}, not {states}: {error}")
            assert time.monotonic() < deadline, f"job {job_id} still {state}"
            time.sleep(0.1)

    def state(self, job_id: str) -> str:
        return str(self.daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]["state"])


def command_spec(test: str, revision: str, seconds: float, iterations: int = 8) -> dict[str, Any]:
    return {
        "suite": "rep",
        "test": test,
        "scenario": "command",
        "iterations": iterations,
        "warmup": 1,
        "params": {"command": ["sleep", str(seconds)]},
        "build": {"revision": revision},
        "metrics": [{"name": "wall_time_ms", "unit": "ms"}],
        "device": {"platform": "host"},
    }


def page_load_spec() -> dict[str, Any]:
    spec = tomllib.loads((ROOT / "examples/page/chromium-none.toml").read_text())
    # The console shows what was kept; a loaded test machine drops frames, which would set
    # the iterations aside (the capture's own tests hold that line).
    params = spec["params"] | {"max_dropped_frames": 1000}
    return spec | {"iterations": 2, "warmup": 0, "params": params}


def _config(tmp: Path, with_x11: bool) -> Path:
    principals = "".join(
        f'[auth.principals.{role}]\nrole = "{role}"\n'
        f'token_sha256 = ["{hashlib.sha256(TOKENS[role].encode()).hexdigest()}"]\n'
        for role in ROLES
    )
    x11 = '[drivers.x11]\nxvfb = ["1280x800"]\n' if with_x11 else ""
    path = tmp / "labd.toml"
    path.write_text(
        f'[daemon]\nlab = "console-{uuid.uuid4().hex[:10]}"\nstate_dir = "{tmp / "state"}"\n'
        'shutdown_grace = 5\n[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
        f"[policy]\nprograms = {json.dumps(TEST_PROGRAMS)}\n"
        f'[replay]\narchive_dir = "{ROOT}"\n{x11}{principals}'
    )
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("console")
    with_x11 = bool(shutil.which("Xvfb") and CHROMIUM)
    daemon = LabdProcess(_config(tmp, with_x11), env={"HOME": str(tmp)})
    lab = Lab(daemon)
    try:
        if with_x11:  # started first: it runs on its own device while the commands run
            lab.page_load = "page-load"
            lab.submit(lab.page_load, page_load_spec())
        runs = [("t", "r1", 0.01), ("u", "r1", 0.02), ("t", "r2", 0.05), ("u", "r2", 0.02)]
        runs += [("t", "r3", 0.05)]
        for test, revision, seconds in runs:
            job_id = f"{test}-{revision}"
            lab.submit(job_id, command_spec(test, revision, seconds))
            lab.wait(job_id)
            lab.jobs[job_id] = job_id
        if lab.page_load is not None:
            lab.wait(lab.page_load)
        yield lab
    finally:
        daemon.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        if REQUIRE_SERVICES:
            pytest.fail("chromium is missing (apt-get install chromium)")
        pytest.skip("chromium is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        found = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required"],
        )
        yield found
        found.close()


@pytest.fixture
def page_as(lab: Lab, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Call with a role: a browser page signed in as that role through the sign-in form.
    Each page's screenshot is kept under test-artifacts/console/ when the test ends."""
    contexts: list[Any] = []

    def open_as(role: str) -> Any:
        context = browser.new_context(base_url=lab.base, viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.goto("/console/login")
        page.fill("input[name=token]", TOKENS[role])
        page.click("button[type=submit]")
        page.wait_for_url("**/console/devices")
        return page

    yield open_as
    from playwright.sync_api import Error as PlaywrightError

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for n, context in enumerate(contexts):
        for m, page in enumerate(context.pages):
            name = f"{request.node.name}-{n}-{m}.png"
            try:  # evidence kept for people, not an assertion: a slow one must not fail the test
                page.screenshot(path=ARTIFACTS / name, full_page=True)
            except PlaywrightError as e:
                warnings.warn(f"no screenshot {name}: {e.message}", stacklevel=1)
        context.close()

"""Pages that stop answering, and browsers that never start, end the iteration in bounded time
with the reason named: a dialog open, a script that never yields or a crashed tab fail it
within about load_timeout_s (not the job's time-out); a job's own broken browser command is
the job's failure, never the device's. Xvfb, real browsers, pages from a local server."""

from __future__ import annotations

import functools
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from labd.errors import CannotStart, InfrastructureError, TestFailure
from labd.sdk import Device, Policy, RunContext
from labd_browser import PageLoad, PageLoadParams
from labd_browser import pageload as pageload_module
from labd_browser.devtools import read_page
from labd_x11 import X11Driver, X11Options
from labd_x11.keycodes import SpareKeycodes
from tests.conftest import need_program

PAGES = {
    "/ok": "<h1>done</h1>",
    "/alert": "<h1>hello</h1><script>setTimeout(() => alert('x'), 300)</script>",
    "/loop": "<h1>busy</h1><script>setTimeout(() => { while (true) {} }, 300)</script>",
    "/crash": "<h1>about to crash</h1><script>onload = () => fetch('/beacon')</script>",
    # Drawn at once; the image's server never finishes, so the tab's spinner keeps turning.
    "/endless-image": "<h1 style='font-size:60px'>drawn</h1><img src='/never' width=50 height=50>",
    "/endless-beacon": "<h1 style='font-size:60px'>drawn</h1><img src='/never' width=50 height=50>"
    "<script>fetch('/beacon')</script>",
    # Text at once, a large image LATE_S later: still between the two for longer than quiet_ms.
    "/late-image": "<h1>text first</h1><img src='/late.png' width=300 height=200>",
    "/all-green": "<style>body { background: #00ff00 }</style>",  # labd's start colour
    # White text on white: a contentful paint (Chromium then lets go of the green screen it
    # holds until one, which an empty page never gives) that draws nothing visible.
    "/blank": "<title>nothing drawn</title><p style='color:#fff'>invisible</p>",
    "/p%C3%A4th/%E6%97%A5%E6%9C%AC?q=%C3%A9": "<h1>päth 日本</h1>",  # /päth/日本?q=é
    # Loads at once, then repaints for ever.
    "/restless": "<h1 id=n style='font-size:80px'>0</h1><script>let i = 0; "
    "setInterval(() => { n.textContent = ++i }, 100)</script>",
    # 28 MB of static text: Chromium holds its script for seconds while it lays it out.
    "/huge": "".join(
        f"<p>paragraph {i}: {'lorem ipsum dolor sit amet ' * 8}</p>" for i in range(120_000)
    ),
}
LATE_S = 1.5
LOAD_TIMEOUT_S = 10
BLUE_PNG = cv2.imencode(".png", np.full((20, 30, 3), (255, 0, 0), np.uint8))[1].tobytes()


class Site:
    """A page server on a free port; `on_beacon` runs when a page requests /beacon."""

    def __init__(self) -> None:
        self.closing = threading.Event()
        self.on_beacon: Callable[[], None] = lambda: None
        self.moved_to = ""  # where /moved redirects
        self.paths: list[str] = []  # asked for, in order
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.paths.append(self.path)
                if self.path == "/never":
                    self.send_response(200)
                    self.send_header("Content-Type", "image/png")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    self.wfile.write(b"\x89PNG")
                    self.wfile.flush()
                    site.closing.wait(120)
                    return
                if self.path == "/beacon":
                    site.on_beacon()
                if self.path == "/moved":  # to wherever the test says
                    self.send_response(302)
                    self.send_header("Location", site.moved_to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/empty-404":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/late.png":
                    time.sleep(LATE_S)
                    self.send_response(200)
                    self.send_header("Content-Type", "image/png")
                    self.send_header("Content-Length", str(len(BLUE_PNG)))
                    self.end_headers()
                    self.wfile.write(BLUE_PNG)
                    return
                body = f"<html><body>{PAGES.get(self.path, '')}</body></html>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    thread = threading.Thread(target=s.server.serve_forever, name="test-site", daemon=True)
    thread.start()
    yield s
    s.closing.set()
    s.server.shutdown()
    s.server.server_close()


def page_load(xvfb: str, tmp_path: Path, policy: Policy | None = None, **params: Any) -> PageLoad:
    device = Device(
        id="x", driver="x11", platform="x11", capabilities={"display": xvfb, "width": 640}
    )
    resources = X11Driver(X11Options(), "h").resources(device)
    ctx = RunContext("job", 1, device, tmp_path, policy=policy or Policy(), resources=resources)
    options = {"quiet_ms": 500, "load_timeout_s": LOAD_TIMEOUT_S, "fps": 10, "keep_video": False}
    return PageLoad(PageLoadParams(**(options | params)), ctx)


async def one_iteration(scenario: PageLoad) -> tuple[dict[str, float], float]:
    """The iteration's values and how long it took."""
    began = time.monotonic()
    await scenario.setup()
    try:
        return await scenario.run_iteration(0), time.monotonic() - began
    finally:
        await scenario.teardown()


async def failed_within(scenario: PageLoad, seconds: float) -> str:
    began = time.monotonic()
    with pytest.raises(TestFailure) as caught:
        await one_iteration(scenario)
    took = time.monotonic() - began
    assert took < seconds, f"took {took:.0f} s: {caught.value}"
    return str(caught.value)


def need(browser: str) -> None:
    need_program("chromium" if browser == "chromium" else "firefox-esr")


def renderers(root: int) -> list[int]:
    """The page renderers below the browser `root` (not its own user interface's)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:  # Chromium rewrites its helpers' argv as one string: search it whole
            argv = (proc / "cmdline").read_bytes()
            group = os.getpgid(int(proc.name))
        except OSError:
            continue
        page = b"--type=renderer" in argv and b"--top-chrome-webui" not in argv
        if page and group == root:  # the browser's helpers share its group
            found.append(int(proc.name))
    return found


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_a_page_with_an_alert_fails_within_the_load_time_out(
    xvfb: str, tmp_path: Path, site: Site, browser: str
) -> None:
    need(browser)
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/alert", browser=browser)
    why = await failed_within(scenario, LOAD_TIMEOUT_S + 15)
    assert "dialog (alert, confirm, prompt)" in why


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_a_script_that_never_yields_fails_within_the_load_time_out(
    xvfb: str, tmp_path: Path, site: Site, browser: str
) -> None:
    need(browser)
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/loop", browser=browser)
    why = await failed_within(scenario, LOAD_TIMEOUT_S + 15)
    assert "did not answer within 5 s" in why


async def test_a_crashed_tab_fails_the_iteration_naming_the_crash(
    xvfb: str, tmp_path: Path, site: Site
) -> None:
    need("chromium")
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/crash")

    killed: list[int] = []

    def crash() -> None:  # what an out-of-memory renderer does: it dies, "Aw, Snap!" shows
        assert scenario.browser is not None
        for pid in renderers(scenario.browser.pid):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    site.on_beacon = crash
    why = await failed_within(scenario, LOAD_TIMEOUT_S + 15)
    assert (
        killed and why == "the page's tab crashed (the browser shows its error page, not the page)"
    )


async def test_a_browser_killed_mid_load_fails_the_iteration_naming_it(
    xvfb: str, tmp_path: Path, site: Site
) -> None:
    """A tester's kill -9 of Chromium mid-load: the display's empty root window stayed, the
    pixels alone took it for the page, finished, and the iteration was measured (visually
    complete at 5.7 s, no error)."""
    need("chromium")
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/endless-beacon")

    def kill() -> None:  # a second after the page asked for its beacon: drawn, not loaded
        assert scenario.browser is not None
        os.kill(scenario.browser.pid, signal.SIGKILL)

    site.on_beacon = lambda: threading.Timer(1.0, kill).start()
    why = await failed_within(scenario, LOAD_TIMEOUT_S + 15)
    assert why == (
        "chromium exited during the page load (status -9): the screen no longer showed the page"
    )


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_a_drawn_page_whose_image_never_arrives_is_measured_and_flagged(
    xvfb: str, tmp_path: Path, site: Site, browser: str
) -> None:
    """The screen is still while the tab's spinner turns: its load event never fires, so the
    iteration ends at load_timeout_s with what was drawn, flagged (set aside)."""
    need(browser)
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/endless-image", browser=browser)
    values, took = await one_iteration(scenario)
    assert values["visually_complete_ms"] < 5000 and took < LOAD_TIMEOUT_S + 15
    assert "browser.load" not in values
    (flag,) = scenario.ctx.flags
    assert flag.startswith(f"the browser's load event had not fired after {LOAD_TIMEOUT_S} s")


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_an_image_arriving_after_a_still_spell_is_waited_for(
    xvfb: str, tmp_path: Path, site: Site, browser: str
) -> None:
    """The text drew at once and the screen stayed still for quiet_ms while the image was on
    its way: the load was taken as done before the image, and visually complete said 0.2 s."""
    need(browser)
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/late-image", browser=browser)
    values, _ = await one_iteration(scenario)
    assert values["visually_complete_ms"] >= LATE_S * 1000
    assert values["browser.load"] >= LATE_S * 1000 and not scenario.ctx.flags


async def test_a_url_beyond_ascii_is_typed_as_the_same_address_in_ascii(
    xvfb: str, tmp_path: Path, site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its characters went through remapped keycodes, which Chromium could read with the map
    before (a tester's URL of 40 hiragana lost 2): a wrong page would be measured."""
    claims: list[int] = []
    claim = SpareKeycodes.claim
    monkeypatch.setattr(SpareKeycodes, "claim", lambda self, n: claims.append(n) or claim(self, n))
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/päth/日本?q=é")
    await one_iteration(scenario)
    assert "/p%C3%A4th/%E6%97%A5%E6%9C%AC?q=%C3%A9" in site.paths
    assert claims == []  # no keycode was remapped for it


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_a_page_of_megabytes_is_measured_though_it_answers_late(
    xvfb: str, tmp_path: Path, site: Site, browser: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chromium, laying out megabytes of text, held its script for seconds (3 s here, over 5 s
    on a loaded host): the page failed as a dialog or a script that never yields, though
    nothing was wrong with it. A slower host is modelled by a shorter wait for an answer."""
    need(browser)
    monkeypatch.setattr(pageload_module, "read_page", functools.partial(read_page, answer_s=1))
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/huge", browser=browser, load_timeout_s=60)
    values, _ = await one_iteration(scenario)
    assert values["browser.load"] > 0 and not scenario.ctx.flags


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
@pytest.mark.parametrize(
    ("where", "named"),
    [
        ("dead-port", {"chromium": "(ERR_CONNECTION_REFUSED)", "firefox": "(connectionFailure)"}),
        ("/empty-404", {"chromium": "(HTTP ERROR 404)", "firefox": "answered HTTP 404"}),
        ("/moved", {"chromium": "(ERR_CONNECTION_REFUSED)", "firefox": "(connectionFailure)"}),
    ],
)
async def test_a_page_that_does_not_load_fails_naming_why(
    xvfb: str, tmp_path: Path, site: Site, browser: str, where: str, named: dict[str, str]
) -> None:
    """Each measured the browser's own error page and succeeded."""
    need(browser)
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{unused.getsockname()[1]}/"
    url = dead if where == "dead-port" else site.url + where
    site.moved_to = dead + "next"
    scenario = page_load(xvfb, tmp_path, url=url, browser=browser, load_timeout_s=60)
    why = await failed_within(scenario, 30)  # the browser's start, not the load time-out
    assert why.startswith(f"{url} did not load: ") and named[browser] in why
    # Where it failed: a redirect's target was not named (the URL typed was).
    failed_at = site.moved_to if where == "/moved" else url
    assert why.endswith(f" at {failed_at}")


@pytest.mark.parametrize("browser", ["chromium", "firefox"])
async def test_a_page_that_loads_and_never_comes_to_rest_fails_saying_so(
    xvfb: str, tmp_path: Path, site: Site, browser: str
) -> None:
    """It said the page "did not finish loading", though its load event had long fired."""
    need(browser)
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/restless", browser=browser)
    why = await failed_within(scenario, LOAD_TIMEOUT_S + 15)
    assert why.startswith(f"the page loaded but did not come to rest within {LOAD_TIMEOUT_S} s")


async def test_a_page_all_in_the_start_colour_fails_at_once_naming_it(
    xvfb: str, tmp_path: Path, site: Site
) -> None:
    """It failed after load_timeout_s, saying nothing was drawn."""
    need("chromium")
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/all-green", load_timeout_s=60)
    why = await failed_within(scenario, 30)
    assert "drew nothing different from labd's green start screen" in why


async def test_a_page_that_draws_nothing_fails_naming_the_screen_capture_not_its_spool(
    xvfb: str, tmp_path: Path, site: Site
) -> None:
    """The error named .../iteration-0/capture.avi, a file deleted once it was analysed."""
    need("chromium")
    scenario = page_load(xvfb, tmp_path, url=f"{site.url}/blank", load_timeout_s=60)
    why = await failed_within(scenario, 60)
    assert why.startswith("the screen capture: nothing between the green (start) and red"), why
    assert "capture.avi" not in why


async def test_a_job_command_that_exits_at_once_is_the_jobs_failure(
    xvfb: str, tmp_path: Path
) -> None:
    policy = Policy.resolve(["false"], "/usr/local/bin:/usr/bin:/bin", [], "nobody", euid=1)
    scenario = page_load(xvfb, tmp_path, policy, url="http://x.test/", command=["false"])
    with pytest.raises(CannotStart, match=r"command 'false' exited at start \(status 1\)"):
        await one_iteration(scenario)


async def test_a_job_command_that_opens_no_window_is_the_jobs_failure(
    xvfb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pageload_module, "WINDOW_S", 2.0)
    policy = Policy.resolve(["python3"], "/usr/local/bin:/usr/bin:/bin", [], "nobody", euid=1)
    command = ["python3", "-c", "import time; time.sleep(60)"]  # the browser's flags: its argv
    scenario = page_load(xvfb, tmp_path, policy, url="http://x.test/", command=command)
    with pytest.raises(CannotStart, match="command 'python3' opened no window within 2 s"):
        await one_iteration(scenario)


async def test_labds_own_browser_opening_no_window_is_the_devices(
    xvfb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need("chromium")
    monkeypatch.setattr(pageload_module, "WINDOW_S", 0.1)  # before chromium can draw
    scenario = page_load(xvfb, tmp_path, url="http://x.test/")
    with pytest.raises(InfrastructureError, match=r"chromium opened no window within 0\.1 s"):
        await one_iteration(scenario)


async def test_a_command_the_policy_no_longer_allows_does_not_start(
    xvfb: str, tmp_path: Path
) -> None:
    need("chromium")  # allowed at submit; labd restarted since with a narrower policy
    policy = Policy.resolve(["python3"], "/usr/local/bin:/usr/bin:/bin", [], "nobody", euid=1)
    scenario = page_load(xvfb, tmp_path, policy, url="http://x.test/", command=["chromium"])
    with pytest.raises(CannotStart, match=r"'chromium' is not allowed by policy\.programs"):
        await one_iteration(scenario)
    assert scenario.browser is None

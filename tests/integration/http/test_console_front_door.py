"""The console's front door on a real daemon: the headers every answer carries, sign-in and
sign-out audited, and live streams bound to their session."""

from __future__ import annotations

import http.client
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LabdProcess

FRAMING = ("Content-Security-Policy", "X-Frame-Options", "Cache-Control")


def ask(
    daemon: LabdProcess, method: str, path: str, headers: dict[str, str] | None = None,
    body: str | None = None,
) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
    """One request to the side port exactly as given."""
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=20)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def sign_in(daemon: LabdProcess, token: str) -> tuple[int, str]:
    """(status, session cookie) of a browser's sign-in with `token`."""
    form = urllib.parse.urlencode({"token": token})
    status, headers, _ = ask(daemon, "POST", "/console/login", {
        "Origin": f"http://127.0.0.1:{daemon.port}",
        "Content-Type": "application/x-www-form-urlencoded",
    }, form)  # fmt: skip
    return status, headers.get("Set-Cookie", "").split(";")[0]


@pytest.fixture
def daemon(start_labd: Any) -> LabdProcess:
    process: LabdProcess = start_labd()
    return process


def test_every_console_answer_forbids_framing_and_caching(daemon: LabdProcess) -> None:
    """The redirect to sign-in, a 404 page, aiohttp's own 404 and an artefact all carry the
    console's CSP, X-Frame-Options and Cache-Control: no-store; the API's artefact is
    revalidated (private, no-cache)."""
    spec = {"suite": "s", "test": "t", "scenario": "command", "iterations": 1, "warmup": 0,
            "params": {"command": ["python3", "-c", "open('a.txt', 'w').write('x')"]}}  # fmt: skip
    assert daemon.post("/api/v1/jobs", {"id": "hdr", "spec": spec})[0] == 201
    redirect = ask(daemon, "GET", "/console/jobs", {"Accept": "text/html"})
    assert redirect[0] == 303
    _, cookie = sign_in(daemon, daemon.token)
    deadline = time.monotonic() + 60
    while daemon.get("/api/v1/jobs/hdr")[1]["job"]["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    answers = {
        "redirect": redirect,
        "no job": ask(daemon, "GET", "/console/jobs/nope", {"Cookie": cookie}),
        # An id no job can have is its rule, as the API says it: it was "no job '../etc'".
        "bad id": ask(daemon, "GET", "/console/jobs/..%2fetc", {"Cookie": cookie}),
        "no route": ask(daemon, "GET", "/console/no/such/page", {"Cookie": cookie}),
        "artefact": ask(daemon, "GET", "/console/jobs/hdr/artefacts/a.txt", {"Cookie": cookie}),
    }
    assert [a[0] for a in answers.values()] == [303, 404, 400, 404, 200]
    assert b"job id" in answers["bad id"][2] and b"no job" not in answers["bad id"][2]
    for what, (_, headers, _) in answers.items():
        assert all(name in headers for name in FRAMING), (what, headers)
        assert headers["X-Frame-Options"] == "DENY", what
        assert headers["Cache-Control"] == "no-store", what
    assert answers["artefact"][1]["Content-Security-Policy"].startswith("sandbox")
    api = urllib.request.Request(daemon.url("/api/v1/jobs/hdr/artefacts/a.txt"),
                                 headers={"Authorization": f"Bearer {daemon.token}"})  # fmt: skip
    with urllib.request.urlopen(api, timeout=10) as r:
        assert r.headers["Cache-Control"] == "private, no-cache" and r.headers["ETag"]


def csrf_of(daemon: LabdProcess, cookie: str) -> str:
    page = ask(daemon, "GET", "/console/devices", {"Cookie": cookie})[2].decode()
    return page.split("name='csrf' value='", 1)[1].split("'", 1)[0]


def sign_out(daemon: LabdProcess, cookie: str) -> int:
    form = urllib.parse.urlencode({"csrf": csrf_of(daemon, cookie)})
    return ask(daemon, "POST", "/console/logout", {
        "Cookie": cookie, "Origin": f"http://127.0.0.1:{daemon.port}",
        "Content-Type": "application/x-www-form-urlencoded",
    }, form)[0]  # fmt: skip


def refusals(daemon: LabdProcess, reason: str) -> float:
    text = ask(daemon, "GET", "/metrics")[2].decode()
    key = f'labd_auth_refusals_total{{channel="http",reason="{reason}"}} '
    return float(text.split(key, 1)[1].split()[0])


def audited(daemon: LabdProcess, action: str, verdict: str) -> list[dict[str, Any]]:
    return [
        line for line in daemon.logs()
        if line.get("audit") and line.get("action") == action and line.get("verdict") == verdict
    ]  # fmt: skip


def test_sign_in_and_sign_out_are_audited_and_a_wrong_token_counted(
    daemon: LabdProcess,
) -> None:
    """A wrong token at sign-in is a 401, an audit line and one more bad_token refusal in
    /metrics; a sign-in and a sign-out are audit lines naming the principal."""
    before = refusals(daemon, "bad_token")
    assert sign_in(daemon, "not-a-token")[0] == 401
    (line,) = audited(daemon, "sign_in", "refused")
    assert (line["channel"], line["reason"], line["target"]) == (
        "http", "bad_token", "/console/login"
    )  # fmt: skip
    assert line["source"] == "127.0.0.1" and "not-a-token" not in daemon.raw_log()
    deadline = time.monotonic() + 10
    while refusals(daemon, "bad_token") != before + 1:  # counted from the bus, a moment later
        assert time.monotonic() < deadline, "the refusal was not counted"
        time.sleep(0.05)
    status, cookie = sign_in(daemon, daemon.token)
    assert status == 303
    (line,) = audited(daemon, "sign_in", "allowed")
    assert line["principal"] == "local" and line["source"] == "127.0.0.1"
    assert sign_out(daemon, cookie) == 303
    (line,) = audited(daemon, "sign_out", "allowed")
    assert line["principal"] == "local" and line["target"] == "/console/logout"


def open_stream(daemon: LabdProcess, cookie: str) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=10)
    conn.request("GET", "/console/live", headers={"Cookie": cookie})
    answer = conn.getresponse()
    if answer.status != 200:
        answer.read()
    return answer.status, answer


def test_a_principal_holds_few_live_streams_and_signing_out_ends_its_own(
    daemon: LabdProcess,
) -> None:
    """One principal holds MAX_STREAMS_PER_PRINCIPAL streams over all its sessions: a newer
    one ends its oldest (told `ended`, so the page does not reconnect); signing out ends that
    session's streams at once."""
    from labd.console.live import MAX_STREAMS_PER_PRINCIPAL

    first, second = sign_in(daemon, daemon.token)[1], sign_in(daemon, daemon.token)[1]
    oldest = open_stream(daemon, second)
    mine = [open_stream(daemon, first) for _ in range(MAX_STREAMS_PER_PRINCIPAL - 1)]
    assert [status for status, _ in [oldest, *mine]] == [200] * MAX_STREAMS_PER_PRINCIPAL
    newest = open_stream(daemon, second)
    assert newest[0] == 200
    # The oldest ends now, not at the next keep-alive (the read would time out).
    assert oldest[1].read().endswith(b"event: ended\ndata: {}\n\n")
    for _, answer in mine:
        assert answer.read1(100).startswith(b"retry:")
    assert sign_out(daemon, first) == 303
    for _, answer in mine:
        assert answer.read().endswith(b"event: ended\ndata: {}\n\n")
    assert open_stream(daemon, first)[0] == 401
    assert newest[1].read1(100).startswith(b"retry:")  # the other session's stream goes on


def test_a_sign_in_posted_from_another_port_of_this_machine_is_refused(
    daemon: LabdProcess,
) -> None:
    """Another local web server's page (same name, other port) is another origin: 403."""
    form = urllib.parse.urlencode({"token": daemon.token})
    for origin in (f"http://127.0.0.1:{daemon.port + 1}", f"http://127.0.0.1:{daemon.port}/"):
        status, _, body = ask(daemon, "POST", "/console/login", {
            "Origin": origin, "Content-Type": "application/x-www-form-urlencoded",
        }, form)  # fmt: skip
        assert status == 403 and b"cross-origin" in body, origin
    assert sign_in(daemon, daemon.token)[0] == 303


async def test_two_consoles_on_one_machine_keep_their_own_sessions(
    start_labd: Any, labd_config: Path
) -> None:
    """Browsers keep cookies by host, not port: signed in to a second labd's console on the
    same machine, a browser is still signed in to the first."""
    import aiohttp

    second = labd_config.parent / "second" / "labd.toml"
    second.parent.mkdir()
    second.write_text(
        labd_config.read_text()
        .replace(str(labd_config.parent / "state"), str(second.parent / "state"))
        .replace('lab = "t-', 'lab = "u-')
    )
    daemons = [start_labd(), start_labd(second)]
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as browser:
        for daemon in daemons:
            base = f"http://127.0.0.1:{daemon.port}"
            async with browser.post(
                f"{base}/console/login",
                data={"token": daemon.token},
                headers={"Origin": base},
                allow_redirects=False,
            ) as answer:
                assert answer.status == 303
        for daemon in daemons:
            async with browser.get(
                f"http://127.0.0.1:{daemon.port}/console/devices", allow_redirects=False
            ) as answer:
                assert answer.status == 200, daemon.port

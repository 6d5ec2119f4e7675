"""What the console of a real daemon tells a person who did something it cannot do: a session
cookie that follows the session's own lapse, a sign-in refused with when to retry, a cookie of
a session the daemon no longer holds, forms and query parameters that are wrong, and a job
cancelled twice. Each message names what was wrong."""

from __future__ import annotations

import http.client
import time
import urllib.parse
from typing import Any

import pytest

from labd.console.access import SESSION_IDLE_S, SIGN_INS_PER_MINUTE
from tests.conftest import LabdProcess
from tests.integration.http.test_console_front_door import ask, csrf_of, sign_in, sign_out

FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def daemon(start_labd: Any) -> LabdProcess:
    process: LabdProcess = start_labd()
    return process


def text_of(body: bytes) -> str:
    return body.decode().replace("&#x27;", "'").replace("&quot;", '"')


def post(
    daemon: LabdProcess, path: str, cookie: str, fields: dict[str, str]
) -> tuple[int, dict[str, str], bytes]:
    return ask(daemon, "POST", path, {
        "Cookie": cookie, "Origin": f"http://127.0.0.1:{daemon.port}", "Content-Type": FORM,
    }, urllib.parse.urlencode(fields))  # fmt: skip


def test_an_active_sessions_cookie_is_renewed_with_each_page(daemon: LabdProcess) -> None:
    """The cookie lasted 8 hours from sign-in whatever the use; each page now sends it again
    for 8 hours from now, the session's own lapse."""
    _, cookie = sign_in(daemon, daemon.token)
    status, headers, _ = ask(daemon, "GET", "/console/devices", {"Cookie": cookie})
    assert status == 200
    renewed = headers.get("Set-Cookie", "")
    assert renewed.startswith(cookie + ";"), renewed
    assert f"Max-Age={SESSION_IDLE_S}" in renewed and "HttpOnly" in renewed
    assert "Path=/console" in renewed and "SameSite=Strict" in renewed


def test_a_sign_in_past_the_rate_limit_says_when_to_retry(daemon: LabdProcess) -> None:
    answers = []
    for _ in range(SIGN_INS_PER_MINUTE + 1):
        form = urllib.parse.urlencode({"token": daemon.token})
        answers.append(ask(daemon, "POST", "/console/login", {
            "Origin": f"http://127.0.0.1:{daemon.port}", "Content-Type": FORM,
        }, form))  # fmt: skip
    status, headers, body = answers[-1]
    assert status == 429
    assert 1 <= int(headers["Retry-After"]) <= 60, headers
    assert f"try again in {headers['Retry-After']} s" in text_of(body)


def test_a_cookie_of_a_session_the_daemon_does_not_hold_is_named_and_cleared(
    daemon: LabdProcess,
) -> None:
    """After a restart (or sign-out elsewhere, or 8 idle hours) the old cookie reached the
    sign-in page without a word and stayed in the browser."""
    _, cookie = sign_in(daemon, daemon.token)
    assert sign_out(daemon, cookie) == 303  # the daemon forgets it, as a restart does
    status, headers, _ = ask(
        daemon, "GET", "/console/jobs", {"Cookie": cookie, "Accept": "text/html"}
    )
    assert status == 303 and headers["Location"].startswith("/console/login?next=")
    status, headers, body = ask(daemon, "GET", headers["Location"], {"Cookie": cookie})
    assert status == 200
    assert "Your console session has ended (signed out, unused for 8 hours, or labd restarted)" in (
        text_of(body)
    )
    name = cookie.split("=", 1)[0]
    assert headers["Set-Cookie"].startswith(f'{name}=""') and "Max-Age=0" in headers["Set-Cookie"]
    status, headers, body = ask(daemon, "GET", "/console/jobs", {"Cookie": cookie})
    assert status == 401 and b"your console session has ended" in body
    assert "Max-Age=0" in headers["Set-Cookie"]
    fresh = ask(daemon, "GET", "/console/login", {})[2]
    assert b"session has ended" not in fresh  # no cookie, nothing ended


def test_a_form_without_its_fields_or_its_length_is_refused_naming_what_is_missing(
    daemon: LabdProcess,
) -> None:
    status, _, body = ask(daemon, "POST", "/console/login", {
        "Origin": f"http://127.0.0.1:{daemon.port}", "Content-Type": FORM,
    }, "x=1")  # fmt: skip
    assert status == 400 and "no token was given" in text_of(body)
    assert "belongs to no principal" not in text_of(body)
    _, cookie = sign_in(daemon, daemon.token)
    status, _, body = post(daemon, "/console/devices/phone-1/drain", cookie, {})
    assert status == 403 and body == b"the form carries no anti-forgery token (csrf)\n"
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=20)
    try:
        conn.request("POST", "/console/devices/phone-1/drain",
                     body=iter([f"csrf={csrf_of(daemon, cookie)}".encode()]), headers={
            "Cookie": cookie, "Origin": f"http://127.0.0.1:{daemon.port}", "Content-Type": FORM,
        }, encode_chunked=True)  # fmt: skip
        chunked = conn.getresponse()
        assert chunked.status == 411, chunked.status
        assert b"needs a Content-Length" in chunked.read()
    finally:
        conn.close()
    # curl -X POST: no body, no Content-Length (http.client would add "Content-Length: 0")
    conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=20)
    try:
        conn.putrequest("POST", "/console/logout")
        for name, value in (("Cookie", cookie), ("Content-Type", FORM),
                            ("Origin", f"http://127.0.0.1:{daemon.port}")):  # fmt: skip
            conn.putheader(name, value)
        conn.endheaders()
        unsized = conn.getresponse()
        assert unsized.status == 411 and b"needs a Content-Length" in unsized.read()
    finally:
        conn.close()


def run_job(daemon: LabdProcess, job_id: str, iterations: int = 1) -> None:
    spec = {"suite": "s", "test": "t", "scenario": "command", "iterations": iterations,
            "warmup": 0, "params": {"command": ["true"]}}  # fmt: skip
    assert daemon.post("/api/v1/jobs", {"id": job_id, "spec": spec})[0] == 201
    deadline = time.monotonic() + 60
    while daemon.get(f"/api/v1/jobs/{job_id}")[1]["job"]["state"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_query_parameters_that_mean_nothing_are_named_on_the_page(daemon: LabdProcess) -> None:
    run_job(daemon, "done", iterations=3)
    _, cookie = sign_in(daemon, daemon.token)

    def page(path: str) -> str:
        status, _, body = ask(daemon, "GET", path, {"Cookie": cookie})
        assert status == 200, (path, status)
        return text_of(body)

    assert "?values='abc' is not a number: it takes an iteration of this job, 0 to 2" in page(
        "/console/jobs/done?values=abc"
    )
    assert "?values=-1 is not an iteration of this job, 0 to 2" in page(
        "/console/jobs/done?values=-1"
    )
    assert "is not" not in page("/console/jobs/done?values=2")
    bogus = page("/console/jobs?state=bogus")
    assert "?state=bogus: no such job state (the states are queued, " in bogus
    assert "every job is shown" in bogus and "/console/jobs/done" in bogus
    assert "no such job state" not in page("/console/jobs?state=succeeded")
    assert "/console/jobs/done" not in page("/console/jobs?state=failed")
    assert "?base= is given but ?new= is missing: compare needs both" in page(
        "/console/compare?base=r0"
    )
    assert "?effect='0.5' is not an effect of interest" in page(
        "/console/compare?base=r0&new=r1&effect=0.5"
    )


def test_cancelling_a_job_that_has_ended_says_so_and_in_which_state(daemon: LabdProcess) -> None:
    run_job(daemon, "over")
    _, cookie = sign_in(daemon, daemon.token)
    status, _, body = post(
        daemon, "/console/jobs/over/cancel", cookie, {"csrf": csrf_of(daemon, cookie)}
    )
    assert status == 409
    assert "Job over had already ended (" in text_of(body) and "succeeded" in text_of(body)
    assert "nothing was cancelled" in text_of(body)
    assert daemon.get("/api/v1/jobs/over")[1]["job"]["state"] == "succeeded"

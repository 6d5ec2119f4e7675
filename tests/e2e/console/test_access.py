"""Who may see and do what in the console: every page and artefact URL for anonymous, viewer,
submitter and admin; forms that only the console's own pages can post."""

from __future__ import annotations

import pytest

from tests.e2e.console.conftest import TOKENS, Lab, command_spec

PAGES = [
    "/console/devices",
    "/console/queue",
    "/console/running",
    "/console/jobs",
    "/console/jobs/t-r1",
    "/console/compare?base=r1&new=r2",
    "/console/history?suite=rep&test=t",
    "/console/history",
]


def artefact_urls(lab: Lab) -> list[str]:
    if lab.page_load is None:
        return []
    job = lab.page_load
    base = f"/console/jobs/{job}/artefacts/iteration-0"
    still = f"/console/jobs/{job}/still?video=iteration-0/video.webm&frame=0"
    return [f"{base}/video.webm", f"{base}/heatmap.png", f"{base}/progress.json", still]


@pytest.fixture(scope="module")
def sessions(lab: Lab) -> dict[str, str]:
    return {role: lab.sign_in(role) for role in TOKENS}


def test_anonymous_gets_nothing_but_the_sign_in_page(lab: Lab) -> None:
    for path in [*PAGES, *artefact_urls(lab), "/console/live"]:
        page = lab.http("GET", path, headers={"Accept": "text/html"})
        if path == "/console/live":
            assert page.status == 303 or page.status == 401, (path, page)
            continue
        assert page.status == 303, (path, page.status)
        assert page.headers["Location"].startswith("/console/login?next=")
        raw = lab.http("GET", path)  # a script, not a browser: a plain 401
        assert raw.status == 401 and "sign in" in raw.text, (path, raw)
    assert lab.http("GET", "/console/login").status == 200
    forged = lab.http(
        "POST", "/console/login", form={"token": "guess"}, headers={"Origin": lab.base}
    )
    assert forged.status == 401 and "belongs to no principal" in forged.text
    for path in ("/console/devices/host-x/drain", "/console/jobs/t-r1/cancel"):
        assert lab.http("POST", path, form={}, headers={"Origin": lab.base}).status == 401


def test_every_role_reads_every_page_and_artefact(lab: Lab, sessions: dict[str, str]) -> None:
    for role, cookie in sessions.items():
        for path in [*PAGES, *artefact_urls(lab)]:
            answer = lab.http("GET", path, cookie=cookie)
            assert answer.status == 200, (role, path, answer.status, answer.text[:300])
            # Pages cannot be framed; a file a job wrote never runs as the console's origin.
            policy = "sandbox" if "/artefacts/" in path else "frame-ancestors 'none'"
            assert policy in answer.headers["Content-Security-Policy"], (path, answer.headers)
    if lab.page_load is not None:
        video = lab.http("GET", artefact_urls(lab)[0], cookie=sessions["viewer"])
        assert video.headers["Content-Type"] == "video/webm"
        outside = f"/console/jobs/{lab.page_load}/artefacts/..%2F..%2Flabd.toml"
        assert lab.http("GET", outside, cookie=sessions["viewer"]).status == 400
    assert lab.http("GET", "/console/no-such-page", headers={"Accept": "text/html"}).status == 303


def _csrf(lab: Lab, cookie: str) -> str:
    page = lab.http("GET", "/console/devices", cookie=cookie).text
    return page.split("name='csrf' value='", 1)[1].split("'", 1)[0]


def test_only_an_admin_drains_and_only_the_owner_or_an_admin_cancels(
    lab: Lab, sessions: dict[str, str]
) -> None:
    device = lab.daemon.get("/api/v1/devices")[1]["devices"]
    host = next(d["id"] for d in device if d["platform"] == "host")
    origin = {"Origin": lab.base}
    for role in ("viewer", "submitter"):
        cookie = sessions[role]
        answer = lab.http(
            "POST",
            f"/console/devices/{host}/drain",
            cookie,
            {"csrf": _csrf(lab, cookie)},
            origin,
        )
        assert answer.status == 403 and "may not administer" in answer.text, (role, answer)
    lab.submit("mine", command_spec("own", "r1", 5, iterations=20), TOKENS["submitter"])
    lab.submit("theirs", command_spec("own", "r1", 5, iterations=20))
    viewer, submitter = sessions["viewer"], sessions["submitter"]
    refused = lab.http(
        "POST", "/console/jobs/mine/cancel", viewer, {"csrf": _csrf(lab, viewer)}, origin
    )
    assert refused.status == 403
    not_own = lab.http(
        "POST", "/console/jobs/theirs/cancel", submitter, {"csrf": _csrf(lab, submitter)}, origin
    )
    assert not_own.status == 403 and "may not cancel job 'theirs'" in not_own.text
    own = lab.http(
        "POST", "/console/jobs/mine/cancel", submitter, {"csrf": _csrf(lab, submitter)}, origin
    )
    assert own.status == 303
    lab.wait("mine", ("cancelled",))
    admin = sessions["admin"]
    theirs = lab.http(
        "POST", "/console/jobs/theirs/cancel", admin, {"csrf": _csrf(lab, admin)}, origin
    )
    assert theirs.status == 303
    lab.wait("theirs", ("cancelled",))
    drained = lab.http(
        "POST", f"/console/devices/{host}/drain", admin, {"csrf": _csrf(lab, admin)}, origin
    )
    assert drained.status == 303
    enabled = lab.http(
        "POST", f"/console/devices/{host}/enable", admin, {"csrf": _csrf(lab, admin)}, origin
    )
    assert enabled.status == 303


def test_a_form_posted_from_elsewhere_is_refused(lab: Lab, sessions: dict[str, str]) -> None:
    """What a cross-site page could send with the admin's cookie, were SameSite not enough."""
    admin = sessions["admin"]
    token = _csrf(lab, admin)
    path = "/console/devices/nowhere/drain"
    cases = {
        "no anti-forgery token": ({}, {"Origin": lab.base}, 403),
        "a wrong token": ({"csrf": "x" * len(token)}, {"Origin": lab.base}, 403),
        "a foreign Origin": ({"csrf": token}, {"Origin": "http://evil.example"}, 403),
        "no Origin": ({"csrf": token}, {}, 403),
    }
    for what, (form, headers, status) in cases.items():
        answer = lab.http("POST", path, admin, form, headers)
        assert answer.status == status, (what, answer)
    as_json = lab.http(
        "POST",
        path,
        admin,
        {"csrf": token},
        {"Origin": lab.base, "Content-Type": "application/json"},
    )
    assert as_json.status == 415
    rebinding = lab.http("GET", "/console/devices", admin, headers={"Host": "evil.example"})
    assert rebinding.status == 403
    # With everything right, the device is simply not there.
    assert lab.http("POST", path, admin, {"csrf": token}, {"Origin": lab.base}).status == 404


def test_signing_out_ends_the_session(lab: Lab) -> None:
    cookie = lab.sign_in("viewer")
    out = lab.http(
        "POST", "/console/logout", cookie, {"csrf": _csrf(lab, cookie)}, {"Origin": lab.base}
    )
    assert out.status == 303
    assert lab.http("GET", "/console/devices", cookie).status == 401

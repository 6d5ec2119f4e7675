"""The API against the attacks of a hostile page, process or principal, on a real `labd run`:
each is refused with its reason, audited, and proven not to have run (the job would have
created a file; after a legitimate job has run, that file does not exist)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from labd.redact import MASK
from tests.integration.http.conftest import SECRET, TOKENS, Lab, unix_request

TOO_DEEP_BODY = "request body is nested more than 64 levels deep"


def _refusals(lab: Lab) -> list[dict[str, Any]]:
    return [line for line in lab.daemon.logs() if line.get("event") == "request refused"]


def _http_refusals(lab: Lab) -> dict[str, float]:
    """labd_auth_refusals_total of the http channel, by reason, where above zero."""
    metrics = lab.daemon.get("/metrics")[1]
    pattern = r'^labd_auth_refusals_total\{channel="http",reason="(\w+)"\} (\S+)$'
    return {r: float(n) for r, n in re.findall(pattern, metrics, re.M) if float(n) > 0}


def _proves_nothing_ran(lab: Lab, names: list[str]) -> None:
    """A legitimate job after the attacks runs (its file appears): the attacks' files,
    which would have been written first, do not exist, and no such job is stored."""
    control = lab.request(
        "POST",
        "/api/v1/jobs",
        {"id": "control", "spec": lab.touch_spec("control")},
        token=TOKENS["ci"],
    )
    assert control.status == 201, control.body
    assert lab.wait_finished("control", TOKENS["ci"])["state"] == "succeeded"
    assert (lab.markers / "control").exists()
    assert [name for name in names if (lab.markers / name).exists()] == []
    jobs = lab.request("GET", "/api/v1/jobs", token=TOKENS["ci"]).body["jobs"]
    assert [j["id"] for j in jobs] == ["control"]


def test_a_cross_site_request_is_refused_and_runs_nothing(lab: Lab) -> None:
    """The request any web page can make (DNS rebinding: text/plain, a foreign Origin and
    Host, no credential), and each of its tricks alone with a valid token."""
    port = lab.daemon.api_port
    attacks = {
        "cross-site": (
            {
                "Content-Type": "text/plain",
                "Origin": "http://evil.example",
                "Host": f"evil.example:{port}",
            },
            None,
            403,
            "host_not_allowed",
        ),
        "text-plain": ({"Content-Type": "text/plain"}, TOKENS["ci"], 415, "unsupported_media_type"),
        "form": (
            {"Content-Type": "application/x-www-form-urlencoded"},
            TOKENS["ci"],
            415,
            "unsupported_media_type",
        ),
        "origin": (
            {"Content-Type": "application/json", "Origin": "http://evil.example"},
            TOKENS["ci"],
            403,
            "origin_not_allowed",
        ),
        "null-origin": (
            {"Content-Type": "application/json", "Origin": "null"},
            TOKENS["ci"],
            403,
            "origin_not_allowed",
        ),
        "rebound-host": (
            {"Content-Type": "application/json", "Host": f"evil.example:{port}"},
            TOKENS["ci"],
            403,
            "host_not_allowed",
        ),
        "no-credential": ({"Content-Type": "application/json"}, None, 401, "no_credential"),
        "wrong-token": ({"Content-Type": "application/json"}, "not-a-token", 401, "bad_token"),
        "basic-auth": (
            {"Content-Type": "application/json", "Authorization": "Basic bG9jYWw6eA=="},
            None,
            401,
            "bad_credential",
        ),
    }
    for name, (headers, token, status, reason) in attacks.items():
        body = json.dumps({"id": name, "spec": lab.touch_spec(name)}).encode()
        answer = lab.request("POST", "/api/v1/jobs", headers=headers, token=token, raw=body)
        assert (answer.status, answer.body["reason"]) == (status, reason), name
    refused = {line["reason"] for line in _refusals(lab)}
    assert refused == {reason for *_, reason in attacks.values()}
    assert all(line["audit"] and line["verdict"] == "refused" for line in _refusals(lab))
    # Counted in /metrics from the AccessRefused events (delivered on the bus, so soon after).
    expected = {"unsupported_media_type": 2, "host_not_allowed": 2, "origin_not_allowed": 2}
    expected |= {"no_credential": 1, "bad_token": 1, "bad_credential": 1}
    deadline = time.monotonic() + 10
    while (counted := _http_refusals(lab)) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counted == expected
    _proves_nothing_ran(lab, list(attacks))


def test_host_and_origin_are_parsed_strictly(lab: Lab) -> None:
    """A Host that is more than one host[:port], names another port or ends in a dot, and an
    Origin that is more than scheme://host[:port] or is another port of this machine (another
    web server's page), are refused; this daemon's own host and origin pass."""
    port = lab.daemon.api_port
    refused = {
        "host userinfo": {"Host": f"localhost:{port}@evil.example"},
        "host two names": {"Host": f"localhost:{port} evil.example"},
        "host trailing dot": {"Host": f"localhost.:{port}"},
        "host other port": {"Host": f"localhost:{port + 1}"},
        "origin two": {"Origin": f"http://127.0.0.1:{port} http://evil.example"},
        "origin path": {"Origin": f"http://127.0.0.1:{port}/x"},
        "origin userinfo": {"Origin": f"http://evil.example@127.0.0.1:{port}"},
        "origin other port": {"Origin": f"http://127.0.0.1:{port + 1}"},
        "origin default port": {"Origin": "http://localhost"},
    }
    for name, headers in refused.items():
        answer = lab.request("GET", "/api/v1/jobs", headers=headers, token=TOKENS["viewer"])
        assert answer.status == 403, (name, answer.body)
        reason = "host_not_allowed" if name.startswith("host") else "origin_not_allowed"
        assert answer.body["reason"] == reason, name
    allowed = [
        {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"},
        {"Host": f"[::1]:{port}", "Origin": f"http://127.0.0.1:{port}"},
        {"Host": "localhost"},  # the local command on the Unix socket sends this
        {"Host": "localhost", "Origin": "http://localhost"},  # behind a proxy on port 80
    ]
    for headers in allowed:
        answer = lab.request("GET", "/api/v1/jobs", headers=headers, token=TOKENS["viewer"])
        assert answer.status == 200, (headers, answer.body)


def test_the_side_port_serves_metrics_but_never_the_api(lab: Lab) -> None:
    status, _ = lab.daemon.get("/metrics")
    assert status == 200
    base = f"http://127.0.0.1:{lab.daemon.port}"
    body = json.dumps({"id": "side", "spec": lab.touch_spec("side")}).encode()
    request = urllib.request.Request(
        f"{base}/api/v1/jobs",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKENS['ci']}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 404
    _proves_nothing_ran(lab, ["side"])


def _raw_request(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


def test_a_request_too_long_to_parse_is_a_warning_not_an_error(lab: Lab) -> None:
    """A 10,000-character URL on the open side port was a 400 and an error-level traceback
    from aiohttp: anyone who could reach the port could add lines to `journalctl -p err`."""
    assert lab.daemon.port is not None and lab.daemon.api_port is not None
    line = b"GET /metrics?x=" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    header = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"b" * 10_000 + b"\r\n\r\n"
    side, api = lab.daemon.port, lab.daemon.api_port
    for port, head in [(side, line), (side, header), (api, line)]:
        assert _raw_request(port, head).split(b"\r\n")[0].endswith(b" 400 Bad Request"), port
    deadline = time.monotonic() + 10
    while not [x for x in lab.daemon.logs() if x.get("logger") == "aiohttp.server"]:
        assert time.monotonic() < deadline, lab.daemon.raw_log()
        time.sleep(0.05)
    time.sleep(0.5)
    # One line a minute: the two after the first are counted on the next one said.
    [record] = [x for x in lab.daemon.logs() if x.get("logger") == "aiohttp.server"]
    assert record["level"] == "warning" and "exception" not in record, record
    assert (record["event"], record["peer"]) == ("bad HTTP request refused", "127.0.0.1")
    assert len(record["reason"]) < 300 and record["left_out"] == 0, record
    assert "Traceback" not in lab.daemon.raw_log()
    assert lab.daemon.get("/metrics")[0] == 200  # and the port still serves


def test_roles_and_ownership_are_enforced(lab: Lab) -> None:
    ci, other, viewer = TOKENS["ci"], TOKENS["other"], TOKENS["viewer"]
    slow = lab.touch_spec("slow") | {"params": {"command": ["sleep", "30"]}}
    assert lab.request("POST", "/api/v1/jobs", {"id": "slow", "spec": slow}, token=ci).status == 201

    # A submitter cannot cancel another's job, nor command a device; a viewer cannot submit.
    answer = lab.request("POST", "/api/v1/jobs/slow/cancel", {}, token=other)
    assert (answer.status, answer.body["errors"], answer.body["reason"]) == (
        403,
        ["principal 'other' may not cancel job 'slow' (submitted by 'ci')"],
        "forbidden",
    )
    device = lab.request("GET", "/api/v1/devices", token=viewer).body["devices"][0]["id"]
    answer = lab.request("POST", f"/api/v1/devices/{device}/drain", {}, token=ci)
    assert (answer.status, answer.body["reason"]) == (403, "forbidden")
    answer = lab.request(
        "POST", "/api/v1/jobs", {"id": "v", "spec": lab.touch_spec("viewer")}, token=viewer
    )
    assert (answer.status, answer.body["reason"]) == (403, "forbidden")
    assert (
        lab.request("GET", f"/api/v1/devices/{device}", token=viewer).body["device"]["admin"]
        == "enabled"
    )
    assert lab.request("GET", "/api/v1/jobs/slow", token=viewer).body["job"]["state"] in (
        "queued",
        "leased",
        "running",
    )

    # The owner may cancel its own job; the local admin may command the device.
    answer = lab.request("POST", "/api/v1/jobs/slow/cancel", {}, token=ci)
    assert answer.status == 200 and answer.body["job"]["cancel_requested"] is True
    assert lab.wait_finished("slow", ci)["state"] == "cancelled"
    answer = lab.request("POST", f"/api/v1/devices/{device}/drain", {}, token=lab.daemon.token)
    assert answer.status == 200 and answer.body["device"]["admin"] == "draining"
    reasons = [(r["principal"], r["action"], r["reason"]) for r in _refusals(lab)]
    assert reasons == [
        ("other", "cancel", "forbidden"),
        ("ci", "administer", "forbidden"),
        ("viewer", "submit", "forbidden"),
    ]
    assert not (lab.markers / "viewer").exists()


def test_the_submitter_is_the_authenticated_principal(lab: Lab) -> None:
    spec = lab.touch_spec("owned")
    answer = lab.request(
        "POST",
        "/api/v1/jobs",
        {"id": "owned", "spec": spec, "submitter": "local"},
        token=TOKENS["ci"],
    )
    assert answer.status == 400 and "submitter" in answer.body["errors"][0]
    answer = lab.request("POST", "/api/v1/jobs", {"id": "owned", "spec": spec}, token=TOKENS["ci"])
    assert answer.status == 201 and answer.body["job"]["submitter"] == "ci"
    allowed = [line for line in lab.daemon.logs() if line.get("event") == "request allowed"]
    assert [(a["principal"], a["action"], a["source"]) for a in allowed] == [
        ("ci", "submit", "127.0.0.1")
    ]


def test_secrets_are_in_no_answer(lab: Lab) -> None:
    ci = TOKENS["ci"]
    spec = lab.touch_spec("secretive", env={"API_TOKEN": SECRET})
    answers = [lab.request("POST", "/api/v1/jobs", {"id": "secretive", "spec": spec}, token=ci)]
    assert answers[0].status == 201
    lab.wait_finished("secretive", ci)
    for path in ("/api/v1/jobs", "/api/v1/jobs/secretive", "/api/v1/jobs/secretive/results"):
        answers.append(lab.request("GET", path, token=ci))
    answers.append(lab.request("POST", "/api/v1/jobs", {"id": "secretive", "spec": spec}, token=ci))
    answers.append(lab.request("POST", "/api/v1/jobs/secretive/cancel", {}, token=ci))
    assert [a.status for a in answers] == [201, 200, 200, 200, 200, 200]
    assert all(SECRET.encode() not in a.raw for a in answers)
    assert answers[2].body["job"]["spec"]["params"]["env"] == {"API_TOKEN": MASK}
    # The job ran with its secret all the same.
    assert (lab.markers / "secretive").exists()
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "labd",
            "--config",
            str(lab.daemon.config),
            "jobs",
            "show",
            "secretive",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0 and "secretive" in shown.stdout and SECRET not in shown.stdout


def test_a_secret_the_program_writes_to_stderr_is_masked_in_its_error(lab: Lab) -> None:
    ci = TOKENS["ci"]
    leak = "import os, sys; sys.exit('login failed with token ' + os.environ['API_TOKEN'])"
    spec = lab.touch_spec("leaky", env={"API_TOKEN": SECRET})
    spec["params"]["command"] = ["python3", "-c", leak]
    submitted = lab.request("POST", "/api/v1/jobs", {"id": "leaky", "spec": spec}, token=ci)
    assert submitted.status == 201
    job = lab.wait_finished("leaky", ci)
    assert job["state"] == "failed"
    # The error still says what went wrong, with the value masked where it stood.
    assert f"login failed with token {MASK}" in job["error"]
    answers = [
        lab.request("GET", path, token=ci)
        for path in ("/api/v1/jobs", "/api/v1/jobs/leaky", "/api/v1/jobs/leaky/results")
    ]
    assert [a.status for a in answers] == [200, 200, 200]
    assert all(SECRET.encode() not in a.raw for a in answers)
    assert f"token {MASK}".encode() in answers[2].raw  # the failed iteration's error
    shown = subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(lab.daemon.config), "jobs", "show",
         "leaky", "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode == 0 and MASK in shown.stdout and SECRET not in shown.stdout
    assert "leaky" in lab.daemon.raw_log() and SECRET not in lab.daemon.raw_log()


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as another account needs root")
def test_the_unix_socket_knows_the_account_at_the_other_end(lab: Lab) -> None:
    spec = lab.touch_spec("by-socket")
    # The daemon's own account (root here) is the local admin: its job runs.
    status, answer = unix_request(lab.socket, "POST", "/api/v1/jobs", {"id": "s", "spec": spec})
    assert status == 201 and answer["job"]["submitter"] == "local"
    # nobody is the viewer's unix_users entry: it reads, but may not submit.
    status, answer = unix_request(lab.socket, "GET", "/api/v1/jobs", uid=65534)
    assert status == 200 and [j["id"] for j in answer["jobs"]] == ["s"]
    late = {"id": "n", "spec": lab.touch_spec("by-nobody")}
    status, answer = unix_request(lab.socket, "POST", "/api/v1/jobs", late, uid=65534)
    assert (status, answer["reason"]) == (403, "forbidden")
    # An account no principal lists gets nothing.
    status, answer = unix_request(lab.socket, "GET", "/api/v1/jobs", uid=12345)
    assert (status, answer["reason"]) == (403, "unknown_peer")
    assert lab.wait_finished("s", TOKENS["ci"])["state"] == "succeeded"
    assert (lab.markers / "by-socket").exists() and not (lab.markers / "by-nobody").exists()
    sources = [line["source"] for line in _refusals(lab)]
    assert sources[0].startswith("uid 65534 ") and sources[1].startswith("uid 12345 ")


def test_the_labd_command_uses_the_socket_or_a_token(lab: Lab, tmp_path: Path) -> None:
    def labd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "labd", "--config", str(lab.daemon.config), *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in os.environ.items() if not k.startswith("LABD_")} | (env or {}),
        )

    manifest = tmp_path / "job.toml"
    manifest.write_text(
        f'suite = "cli"\ntest = "touch"\nscenario = "command"\niterations = 1\nwarmup = 0\n'
        f'[params]\ncommand = ["touch", "{lab.markers / "cli"}"]\n'
    )
    # No flag: the socket, as the local admin.
    result = labd("submit", str(manifest), "--via", "api", "--id", "cli-1", "--wait")
    assert result.returncode == 0, result.stderr
    assert (lab.markers / "cli").exists()
    # Again (a CI step retried): harmless, the same job followed, nothing run twice.
    (lab.markers / "cli").unlink()
    result = labd("submit", str(manifest), "--via", "api", "--id", "cli-1", "--wait", "--json")
    assert result.returncode == 0 and "exists (succeeded)" not in result.stderr, result.stderr
    assert json.loads(result.stdout)["job"]["id"] == "cli-1"
    result = labd("submit", str(manifest), "--via", "api", "--id", "cli-1")
    assert (result.returncode, result.stdout) == (
        0,
        "job cli-1 exists (succeeded): submitted before with this spec\n",
    )
    assert not (lab.markers / "cli").exists()
    # A listing cut at its limit says so (50 of 430 queued jobs looked like the whole queue).
    assert labd("submit", str(manifest), "--via", "api", "--id", "cli-2").returncode == 0
    cut, whole = labd("jobs", "list", "--limit", "1"), labd("jobs", "list")
    assert cut.stdout.count("\ncli-") == 1 and whole.stdout.count("\ncli-") == 2
    assert cut.stderr == (
        "labd: the newest 1 shown, the limit; there may be more (--limit N, at most 1000)\n"
    )
    assert whole.stderr == ""
    # And to a script (a re-tester's find: --json gave no sign of the cut).
    cut_json = labd("jobs", "list", "--limit", "1", "--json")
    assert json.loads(cut_json.stdout)["at_limit"] is True and cut_json.stderr == cut.stderr
    assert json.loads(labd("jobs", "list", "--json").stdout)["at_limit"] is False
    # Elsewhere: a URL and the credentials file of a principal.
    credentials = tmp_path / "ci.toml"
    credentials.write_text(
        'principal = "ci"\nkey_id = "k1"\nsecret_key = "x"\n'
        f'token = "{TOKENS["ci"]}"\nbroker_username = "ci"\nbroker_password = "x"\n'
    )
    url = f"http://localhost:{lab.daemon.api_port}"
    env = {"LABD_CREDENTIALS": str(credentials), "LABD_API_URL": url}
    result = labd("jobs", "show", "cli-1", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["job"]["submitter"] == "local"
    result = labd("jobs", "cancel", "cli-1", env=env)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "principal 'ci' may not cancel job 'cli-1' (submitted by 'local')",
    )
    credentials.write_text(credentials.read_text().replace(TOKENS["ci"], "stolen"))
    result = labd("jobs", "list", env=env)
    assert (result.returncode, result.stderr.strip()) == (2, "unknown bearer token")


def test_a_principal_over_its_rate_is_refused_and_its_job_not_run(lab: Lab) -> None:
    burst = TOKENS["burst"]
    for n in range(2):  # its limit: 2 a minute, each submission counted once
        spec = {"id": f"b{n}", "spec": lab.touch_spec(f"burst-{n}")}
        assert lab.request("POST", "/api/v1/jobs", spec, token=burst).status == 201
    over = {"id": "b2", "spec": lab.touch_spec("burst-2")}
    answer = lab.request("POST", "/api/v1/jobs", over, token=burst)
    assert (answer.status, answer.body["errors"], answer.body["reason"]) == (
        429,
        ["principal 'burst' made 2 submissions in the last minute (limit 2); try again later"],
        "rate_limited",
    )
    assert [(r["principal"], r["reason"]) for r in _refusals(lab)] == [("burst", "rate_limited")]
    assert lab.wait_finished("b1", burst)["state"] == "succeeded"
    assert (lab.markers / "burst-1").exists() and not (lab.markers / "burst-2").exists()
    assert lab.request("GET", "/api/v1/jobs/b2", token=burst).status == 404


def test_a_body_nested_too_deeply_is_a_clear_400(lab: Lab) -> None:
    # 100,000 '[' raised RecursionError inside json.loads: a 500 with nothing said.
    answer = lab.request(
        "POST",
        "/api/v1/jobs",
        headers={"Content-Type": "application/json"},
        token=TOKENS["ci"],
        raw=b"[" * 100_000,
    )
    assert (answer.status, answer.body["errors"]) == (400, [TOO_DEEP_BODY])
    assert lab.request("GET", "/api/v1/jobs", token=TOKENS["viewer"]).status == 200


def test_refused_submissions_are_audited_and_counted(lab: Lab) -> None:
    """A body too large, not JSON, of the wrong shape, a spec no device takes, an id taken by
    another spec: each refused, none counted in /metrics nor audited (an endurance tester's
    flood of 300 KB bodies was invisible), where the same over MQTT was."""
    post = {"headers": {"Content-Type": "application/json"}, "token": TOKENS["ci"]}
    assert lab.request("POST", "/api/v1/jobs", raw=b"x" * 300_000, **post).status == 413
    assert lab.request("POST", "/api/v1/jobs", raw=b"{not json", **post).status == 400
    assert lab.request("POST", "/api/v1/jobs", raw=b'{"spek": 1}', **post).status == 400
    bad = {**lab.touch_spec("nowhere"), "device": {"platform": "android"}}
    assert (
        lab.request("POST", "/api/v1/jobs", {"id": "x1", "spec": bad}, token=TOKENS["ci"]).status
        == 400
    )
    first = {"id": "taken", "spec": lab.touch_spec("taken")}
    assert lab.request("POST", "/api/v1/jobs", first, token=TOKENS["ci"]).status == 201
    other = {"id": "taken", "spec": lab.touch_spec("other")}
    assert lab.request("POST", "/api/v1/jobs", other, token=TOKENS["ci"]).status == 409
    expected = {"too_large": 1, "malformed": 1, "invalid": 1, "invalid_spec": 1, "conflict": 1}
    deadline = time.monotonic() + 10
    while (counted := _http_refusals(lab)) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counted == expected
    assert sorted(line["reason"] for line in _refusals(lab)) == sorted(expected)


def test_a_body_deep_enough_to_break_a_serialiser_is_the_same_clear_400(lab: Lab) -> None:
    # 300 deep parsed, validated, then broke pydantic's serialiser when the job was stored.
    env: Any = "x"
    for _ in range(300):
        env = {"a": env}
    spec = {**lab.touch_spec("deep"), "params": {"env": env}}
    answer = lab.request("POST", "/api/v1/jobs", {"id": "deep", "spec": spec}, token=TOKENS["ci"])
    assert (answer.status, answer.body["errors"]) == (400, [TOO_DEEP_BODY])


def test_a_nul_in_build_text_or_source_is_refused_at_submit_naming_the_field(lab: Lab) -> None:
    """PostgreSQL cannot store a NUL in text: accepted, it broke the history and the analysis
    later. Refused at the model, it is the same 400 on both databases."""
    for field in ("revision", "branch", "build_id", "product", "baseline"):
        spec = lab.touch_spec("nul")
        if field == "baseline":
            spec["baseline"] = "a\x00b"
        else:
            spec["build"] = {field: "a\x00b"}
        body = {"id": "nul", "spec": spec}
        answer = lab.request("POST", "/api/v1/jobs", body, token=TOKENS["ci"])
        assert answer.status == 400, (field, answer.body)
        (problem,) = answer.body["errors"]
        where = "baseline" if field == "baseline" else f"build.{field}"
        assert f"{where}: value error, holds the control character '\\x00'" in problem
    sourced = {"id": "nul", "source": "a\x00b", "spec": lab.touch_spec("nul")}
    answer = lab.request("POST", "/api/v1/jobs", sourced, token=TOKENS["ci"])
    assert (answer.status, answer.body["errors"]) == (
        400,
        ["request: source: value error, holds the control character '\\x00' at 1, got 'a\\x00b'"],
    )
    assert lab.request("GET", "/api/v1/jobs/nul", token=TOKENS["ci"]).status == 404


def test_the_submit_body_is_held_to_the_rules_of_mqtts_submit(lab: Lab) -> None:
    """An unknown key was ignored and `"id": 12` became job "12", where MQTT's SubmitRequest
    refuses both: the body is now validated by its sibling model, each problem naming its field."""
    spec = lab.touch_spec("body")
    refusals = {
        "bogus": ({"spec": spec, "bogus": 1}, "request: bogus: unknown key"),
        "typo": ({"spec": spec, "idd": "x"}, "request: idd: unknown key (did you mean 'id'?)"),
        "number": ({"spec": spec, "id": 12}, "request: id: input should be a valid string, got 12"),
        "null": ({"spec": spec, "id": None}, "request: id: input should be a valid string"),
        "source": ({"spec": spec, "source": 7}, "request: source: input should be a valid string"),
        "no-spec": ({"id": "x"}, "request: spec: field required"),
        "rule": ({"spec": spec, "id": "a/b"}, "request: id: value error, id 'a/b' holds '/'"),
    }
    for name, (body, problem) in refusals.items():
        answer = lab.request("POST", "/api/v1/jobs", body, token=TOKENS["ci"])
        assert answer.status == 400, (name, answer.body)
        (said,) = answer.body["errors"]
        assert said.startswith(problem), (name, said)
    jobs = lab.request("GET", "/api/v1/jobs", token=TOKENS["ci"]).body["jobs"]
    assert jobs == []
    ok = lab.request("POST", "/api/v1/jobs", {"id": "12", "spec": spec}, token=TOKENS["ci"])
    assert ok.status == 201, ok.body


def test_an_id_in_the_path_is_held_to_the_id_rule(lab: Lab) -> None:
    """`GET /api/v1/jobs/..%2f..%2fetc/results` answered 404 "no job '../../etc'": a name no
    job or device could have is refused with the rule, as on MQTT and in the artefact routes."""
    rule = "allowed: letters, digits and _ . @ : - only"
    ci = TOKENS["ci"]
    for method, path, what in [
        ("GET", "/api/v1/jobs/..%2f..%2fetc/results", "job id '../../etc' holds '/'"),
        ("GET", "/api/v1/jobs/..%2f..%2fetc", "job id '../../etc' holds '/'"),
        ("GET", "/api/v1/jobs/a%23b", "job id 'a#b' holds '#'"),
        ("POST", "/api/v1/jobs/..%2fx/cancel", "job id '../x' holds '/'"),
        ("GET", "/api/v1/devices/d%2b1", "device id 'd+1' holds '+'"),
    ]:
        answer = lab.request(method, path, {} if method == "POST" else None, token=ci)
        assert answer.status == 400, (path, answer.body)
        (said,) = answer.body["errors"]
        assert said.startswith(what) and rule in said, (path, said)
    status, body = unix_request(lab.socket, "POST", "/api/v1/devices/a%2fb/drain", {})
    assert status == 400 and body["errors"][0].startswith("device id 'a/b' holds '/'"), body
    assert lab.request("GET", "/api/v1/jobs/nothing-here", token=ci).status == 404


def test_another_principals_job_id_is_a_conflict_that_reveals_nothing(lab: Lab) -> None:
    """`other` submitted pr-42 and cancelled it; `ci` submitting pr-42 with the same spec got
    200 created:false and other's job. A resubmission is harmless for its submitter only."""
    body = {"id": "pr-42", "spec": lab.touch_spec("pr-42")}
    first = lab.request("POST", "/api/v1/jobs", body, token=TOKENS["other"])
    assert first.status == 201, first.body
    lab.request("POST", "/api/v1/jobs/pr-42/cancel", {}, token=TOKENS["other"])
    squatter = lab.request("POST", "/api/v1/jobs", body, token=TOKENS["ci"])
    assert squatter.status == 409, squatter.body
    assert squatter.body["errors"] == ["job id 'pr-42' belongs to another submitter"]
    assert "job" not in squatter.body
    again = lab.request("POST", "/api/v1/jobs", body, token=TOKENS["other"])
    assert again.status == 200 and again.body["created"] is False


def _head_and_body(answer: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
    return status, headers, body


def test_a_request_too_long_to_read_is_answered_without_quoting_it(lab: Lab) -> None:
    """aiohttp's 400 quoted the header it could not read (`Got more than 8190 bytes when
    reading: b'Bearer ...'`): a credential came back in the body, on an answer with no
    no-store."""
    assert lab.daemon.port is not None and lab.daemon.api_port is not None
    token = TOKENS["ci"] + "x" * 9_000
    for port, path in [(lab.daemon.port, "/console/"), (lab.daemon.api_port, "/api/v1/jobs")]:
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
        status, headers, body = _head_and_body(_raw_request(port, head.encode()))
        assert status.endswith("400 Bad Request"), port
        assert body == b"400 Bad Request: the request line or a header is over 8190 bytes\n"
        assert headers["cache-control"] == "no-store"
        assert headers["x-content-type-options"] == "nosniff"


def test_a_host_header_twice_or_none_is_named(lab: Lab) -> None:
    """Both were "a malformed HTTP request", where the docs promise a 400 naming the fault."""
    assert lab.daemon.api_port is not None
    cases = {
        "Host: 127.0.0.1\r\nHost: 127.0.0.1\r\n": b"the Host header is given more than once",
        "": b"no Host header (HTTP/1.1 asks for one)",
    }
    for headers, words in cases.items():
        head = f"GET /api/v1/jobs HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"
        status, _, body = _head_and_body(_raw_request(lab.daemon.api_port, head.encode()))
        assert status.endswith("400 Bad Request") and words in body, body


def test_a_chunked_body_over_the_limit_is_refused_as_one_with_a_length(lab: Lab) -> None:
    """Sent chunked, it was aiohttp's plain-text 413, not the API's JSON."""
    assert lab.daemon.api_port is not None
    size = 300 * 1024
    head = (
        f"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKENS['ci']}"
        "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    chunked = head + f"{size:x}\r\n".encode() + b" " * size + b"\r\n0\r\n\r\n"
    status, _, body = _head_and_body(_raw_request(lab.daemon.api_port, chunked))
    assert status.endswith("413 Request Entity Too Large"), status
    (error,) = json.loads(body)["errors"]
    assert error.startswith("request body over 262,144 bytes, the API's limit (a manifest's")


def test_metrics_and_api_answers_are_not_for_a_shared_cache(lab: Lab) -> None:
    assert lab.daemon.port is not None and lab.daemon.api_port is not None
    jobs = f"GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKENS['ci']}"
    for port, head in [
        (lab.daemon.port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1"),
        (lab.daemon.port, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1"),
        (lab.daemon.api_port, jobs),
        (lab.daemon.api_port, "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1"),  # a 401
    ]:
        raw = _raw_request(port, (head + "\r\nConnection: close\r\n\r\n").encode())
        status, headers, _ = _head_and_body(raw)
        assert (headers.get("cache-control"), headers.get("x-content-type-options")) == (
            "no-store",
            "nosniff",
        ), (status, head)


def test_two_authorization_headers_are_refused_whichever_comes_first(lab: Lab) -> None:
    """The first one won: a proxy that appends its own could be overridden by the client's."""
    for pair in [(TOKENS["viewer"], "xyz"), ("xyz", TOKENS["viewer"])]:
        head = "GET /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        head += "".join(f"Authorization: Bearer {t}\r\n" for t in pair) + "\r\n"
        assert lab.daemon.api_port is not None
        status, _, body = _head_and_body(_raw_request(lab.daemon.api_port, head.encode()))
        assert status.endswith("401 Unauthorized")
        assert json.loads(body) == {
            "errors": ["Authorization given 2 times; send one"],
            "reason": "bad_credential",
        }


def test_a_second_origin_header_is_refused_whichever_comes_first(lab: Lab) -> None:
    """Only the first was checked: this daemon's origin first, a foreign one second, and a
    cancel went through."""
    assert lab.daemon.api_port is not None
    own = f"http://127.0.0.1:{lab.daemon.api_port}"
    for pair in [(own, "http://evil.example"), ("http://evil.example", own)]:
        head = "POST /api/v1/jobs/some-job/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        head += f"Authorization: Bearer {TOKENS['ci']}\r\nContent-Type: application/json\r\n"
        head += "".join(f"Origin: {o}\r\n" for o in pair)
        head += "Content-Length: 0\r\nConnection: close\r\n\r\n"
        status, _, body = _head_and_body(_raw_request(lab.daemon.api_port, head.encode()))
        assert status.endswith("403 Forbidden"), pair
        assert json.loads(body) == {
            "errors": ["Origin given 2 times; a browser sends one"],
            "reason": "origin_not_allowed",
        }


def test_a_job_state_the_lab_does_not_know_is_named_with_those_it_does(lab: Lab) -> None:
    answer = lab.request("GET", "/api/v1/jobs?state=queued&state=bogus", token=TOKENS["ci"])
    assert answer.status == 400
    [problem] = answer.body["errors"]
    assert problem.startswith("state: 'bogus' is not a job state (queued, ")
    assert "succeeded" in problem

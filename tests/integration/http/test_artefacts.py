"""A job's artefacts over the API of a real `labd run`: listed with the job, served with the
right type and byte ranges (a browser's video player seeks with them) to every role, and never
a file outside the job's folder, through a link, or by a malformed name."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.http.conftest import TOKENS, Lab

# The job writes what a page-load job writes (a video, its progress), and what a hostile
# program could: links to a file it cannot read and to /etc, and a hidden file.
JOB_SCRIPT = """
import os, shutil, sys
os.makedirs("iteration-0")
shutil.copy(sys.argv[1], "iteration-0/video.webm")
open("iteration-0/progress.json", "w").write('{"frames": []}')
os.symlink(sys.argv[2], "secret-link")
os.symlink("/etc", "etc-link")
open(".hidden", "w").write("hidden")
open("page.html", "w").write("<script>fetch('/api/v1/jobs')</script>")
"""


@pytest.fixture
def video(lab: Lab) -> Path:
    path = lab.markers / "source.webm"
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-f", "lavfi", "-i",
         "testsrc=duration=2:size=320x240:rate=25", "-c:v", "libvpx", "-b:v", "200k", str(path)],
        check=True,
    )  # fmt: skip
    path.chmod(0o644)
    return path


def _run_job(lab: Lab, video: Path, secret: Path) -> str:
    spec = {
        "suite": "art",
        "test": "files",
        "scenario": "command",
        "iterations": 1,
        "warmup": 0,
        "params": {"command": ["python3", "-c", JOB_SCRIPT, str(video), str(secret)]},
    }
    answer = lab.request("POST", "/api/v1/jobs", {"id": "art1", "spec": spec}, token=TOKENS["ci"])
    assert answer.status == 201, answer.body
    job = lab.wait_finished("art1", TOKENS["ci"])
    assert job["state"] == "succeeded", job["error"]
    return "art1"


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    secret.chmod(0o600)
    return secret


def test_a_viewer_lists_and_plays_a_jobs_video(lab: Lab, video: Path, tmp_path: Path) -> None:
    """The job's files are listed (no link, no hidden file) with the job's results and on
    their own; the video comes back whole as video/webm, and a Range request gets 206 with
    exactly those bytes."""
    job_id = _run_job(lab, video, _secret(tmp_path))
    viewer = TOKENS["viewer"]
    listing = lab.request("GET", f"/api/v1/jobs/{job_id}/artefacts", token=viewer)
    assert listing.status == 200, listing.body
    names = {a["name"]: a for a in listing.body["artefacts"]}
    # The job's log (its PERFHERDER_DATA line) is one of them too.
    assert set(names) == {
        "iteration-0/video.webm", "iteration-0/progress.json", "job.log", "page.html"
    }  # fmt: skip
    assert names["job.log"]["kind"] == "log"
    webm = names["iteration-0/video.webm"]
    source = video.read_bytes()
    assert (webm["kind"], webm["content_type"], webm["size"], webm["iteration"]) == (
        "video", "video/webm", len(source), 0,
    )  # fmt: skip
    results = lab.request("GET", f"/api/v1/jobs/{job_id}/results", token=viewer)
    assert [a["name"] for a in results.body["artefacts"]] == sorted(names)
    # A page the job wrote is never shown as the API's own: downloaded, sandboxed.
    page = _get(lab, names["page.html"]["path"], {})
    assert page[1]["Content-Disposition"] == 'attachment; filename="page.html"'
    assert page[1]["X-Content-Type-Options"] == "nosniff"
    assert page[1]["Content-Security-Policy"].startswith("sandbox")

    whole = lab.request("GET", webm["path"], token=viewer)
    assert whole.status == 200 and whole.raw == source
    part = _get(lab, webm["path"], {"Range": "bytes=100-199"})
    assert part[0] == 206
    assert part[1]["Content-Range"] == f"bytes 100-199/{len(source)}"
    assert part[1]["Content-Type"] == "video/webm" and part[1]["Accept-Ranges"] == "bytes"
    assert part[2] == source[100:200]
    tail = _get(lab, webm["path"], {"Range": f"bytes={len(source)}-"})
    assert tail[0] == 416
    progress = _get(lab, names["iteration-0/progress.json"]["path"], {})
    assert progress[1]["Content-Type"].startswith("application/json")
    assert json.loads(progress[2]) == {"frames": []}


def _get(lab: Lab, path: str, headers: dict[str, str]) -> tuple[int, Any, bytes]:
    import http.client

    assert lab.daemon.api_port is not None
    conn = http.client.HTTPConnection("127.0.0.1", lab.daemon.api_port, timeout=20)
    try:
        sent = {"Authorization": f"Bearer {TOKENS['viewer']}", **headers}
        conn.request("GET", path, headers=sent)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def test_links_traversal_and_odd_names_are_refused(lab: Lab, video: Path, tmp_path: Path) -> None:
    """Every way out of the job's folder is refused with a 4xx that says why, and the
    secret's content is in no answer; without a credential nothing is served."""
    secret = _secret(tmp_path)
    job_id = _run_job(lab, video, secret)
    base = f"/api/v1/jobs/{job_id}/artefacts"
    attempts = {
        f"{base}/secret-link": (403, "symbolic link"),
        f"{base}/etc-link/passwd": (403, "symbolic link"),
        f"{base}/../../../etc/passwd": (400, "not allowed"),
        f"{base}/%2e%2e/%2e%2e/credentials/local.toml": (400, "not allowed"),
        f"{base}/..%2F..%2Fetc%2Fpasswd": (400, "not allowed"),
        f"{base}/.hidden": (400, "not allowed"),
        f"{base}/iteration-0%2fvideo.webm": (400, "sent encoded (%2F)"),  # served, was
        f"{base}/iteration-0": (404, "not a file"),
        f"{base}/iteration-0/missing.webm": (404, "no artefact"),
        "/api/v1/jobs/nope/artefacts/iteration-0/video.webm": (404, "no job"),
        "/api/v1/jobs/-x/artefacts/a.webm": (400, "job id"),
        "/api/v1/jobs/a%20b/artefacts/a.webm": (400, "job id"),
    }
    for path, (status, words) in attempts.items():
        answer = lab.request("GET", path, token=TOKENS["viewer"])
        assert b"TOPSECRET" not in answer.raw and b"root:" not in answer.raw, path
        if answer.status == 404 and "../" in path:
            continue  # the client-side form of `..` may be folded away before routing
        assert answer.status == status, (path, answer.status, answer.body)
        assert words in " ".join(answer.body["errors"]), (path, answer.body)
    video_path = f"{base}/iteration-0/video.webm"
    assert lab.request("GET", video_path).status == 401
    assert lab.request("GET", video_path, token="not-a-token").status == 401
    assert secret.read_text() == "TOPSECRET"  # still there, unread


def test_only_an_admin_applies_the_retention_limits(lab: Lab) -> None:
    """A viewer or a submitter asking for a gc pass is refused (403), even a dry one."""
    for name in ("viewer", "ci"):
        answer = lab.request("POST", "/api/v1/artefacts/gc", {"dry_run": True}, token=TOKENS[name])
        assert answer.status == 403, answer.body


def test_a_named_pipe_in_the_jobs_folder_is_a_404_and_the_daemon_keeps_answering(
    lab: Lab,
) -> None:
    """A job that leaves a FIFO gets a prompt 404 for it on the API and the console, however
    often it is asked, and the daemon's other pages still answer."""
    import http.client
    import urllib.parse

    command = ["python3", "-c", "import os; os.mkfifo('pipe.txt')"]
    spec = {"suite": "art", "test": "fifo", "scenario": "command", "iterations": 1,
            "warmup": 0, "params": {"command": command}}  # fmt: skip
    submitted = lab.request("POST", "/api/v1/jobs", {"id": "jf", "spec": spec}, token=TOKENS["ci"])
    assert submitted.status == 201, submitted.body
    assert lab.wait_finished("jf", TOKENS["ci"])["state"] == "succeeded"
    side = lab.daemon.port
    conn = http.client.HTTPConnection("127.0.0.1", side, timeout=10)
    conn.request("POST", "/console/login", urllib.parse.urlencode({"token": TOKENS["viewer"]}),
                 {"Origin": f"http://127.0.0.1:{side}",
                  "Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    answer = conn.getresponse()
    answer.read()
    cookie = answer.getheader("Set-Cookie", "").split(";")[0]
    for _ in range(15):  # more than the daemon has threads to block
        api = lab.request("GET", "/api/v1/jobs/jf/artefacts/pipe.txt", token=TOKENS["viewer"])
        assert api.status == 404 and "not a file" in api.body["errors"][0], api.body
        conn.request("GET", "/console/jobs/jf/artefacts/pipe.txt", headers={"Cookie": cookie})
        answer = conn.getresponse()
        assert answer.status == 404 and b"not a file" in answer.read()
    conn.request("GET", "/console/jobs/jf/artefacts/x%2Fpipe.txt", headers={"Cookie": cookie})
    answer = conn.getresponse()
    assert answer.status == 400 and b"sent encoded (%2F)" in answer.read()
    listing = lab.request("GET", "/api/v1/jobs/jf/artefacts", token=TOKENS["viewer"])
    assert "pipe.txt" not in {a["name"] for a in listing.body["artefacts"]}
    conn.request("GET", "/metrics")
    assert conn.getresponse().status == 200
    conn.close()


def test_ranges_follow_rfc_9110(lab: Lab, video: Path, tmp_path: Path) -> None:
    """An empty suffix is unsatisfiable (416), an unknown unit is ignored (the whole file, 200),
    and If-Range gives the range only while its entity tag is the file's (else the whole)."""
    job_id = _run_job(lab, video, _secret(tmp_path))
    path = f"/api/v1/jobs/{job_id}/artefacts/iteration-0/video.webm"
    source = video.read_bytes()
    empty = _get(lab, path, {"Range": "bytes=-0"})
    assert empty[0] == 416 and empty[1]["Content-Range"] == f"bytes */{len(source)}"
    unknown = _get(lab, path, {"Range": "items=0-1"})
    assert unknown[0] == 200 and unknown[2] == source
    etag = _get(lab, path, {})[1]["ETag"]
    stale = _get(lab, path, {"Range": "bytes=0-9", "If-Range": '"x"'})
    assert stale[0] == 200 and stale[2] == source
    weak = _get(lab, path, {"Range": "bytes=0-9", "If-Range": f"W/{etag}"})
    assert weak[0] == 200
    fresh = _get(lab, path, {"Range": "bytes=0-9", "If-Range": etag})
    assert fresh[0] == 206 and fresh[2] == source[:10]
    last = _get(lab, path, {"Range": "bytes=-10"})
    assert last[0] == 206 and last[2] == source[-10:]

"""A real `labd run` with principals of every role, and raw HTTP requests to its API."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TEST_PROGRAMS, LabdProcess

TOKENS = {
    name: f"token-of-{name}-{uuid.uuid4().hex}" for name in ("ci", "other", "viewer", "burst")
}
SECRET = f"s3cret-{uuid.uuid4().hex}"


def principal_table(name: str, role: str, extra: str = "") -> str:
    digest = hashlib.sha256(TOKENS[name].encode()).hexdigest()
    return f'[auth.principals.{name}]\nrole = "{role}"\ntoken_sha256 = ["{digest}"]\n{extra}'


@dataclass
class Answer:
    status: int
    body: Any
    raw: bytes


@dataclass
class Lab:
    daemon: LabdProcess
    socket: Path
    markers: Path  # where jobs would create their files

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        token: str | None = None,
        raw: bytes | None = None,
    ) -> Answer:
        """One request to the API's TCP port, exactly as given (no header added but the
        token's, and Content-Type: application/json when a JSON body is given)."""
        assert self.daemon.api_port is not None
        conn = http.client.HTTPConnection("127.0.0.1", self.daemon.api_port, timeout=20)
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode()
            sent.setdefault("Content-Type", "application/json")
        try:
            conn.request(method, path, body=data, headers=sent)
            response = conn.getresponse()
            content = response.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(content)
        except ValueError:
            parsed = content.decode(errors="replace")
        return Answer(response.status, parsed, content)

    def wait_finished(self, job_id: str, token: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.request("GET", f"/api/v1/jobs/{job_id}", token=token).body["job"]
            if job["state"] in ("succeeded", "failed", "cancelled", "timed_out"):
                return dict(job)
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} did not finish within {timeout} s")

    def touch_spec(self, name: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """A job that creates markers/<name> when it runs."""
        return {
            "suite": "attack",
            "test": name,
            "scenario": "command",
            "iterations": 1,
            "warmup": 0,
            "params": {"command": ["touch", str(self.markers / name)], "env": env or {}},
        }


@pytest.fixture
def lab(tmp_path: Path, start_labd: Any) -> Iterator[Lab]:
    # The socket, and the files jobs write, live where every local account can reach them
    # (pytest's tmp_path is 0700; as root, labd runs jobs as policy.run_as, nobody).
    shared = Path(tempfile.mkdtemp(prefix="labd-api-"))
    shared.chmod(0o755)
    markers = shared / "markers"
    markers.mkdir()
    markers.chmod(0o777)
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "t-{uuid.uuid4().hex[:10]}"\n'
        f'state_dir = "{tmp_path / "state"}"\nshutdown_grace = 3\n'
        f'[http]\nport = 0\napi_port = 0\napi_socket = "{shared / "api.sock"}"\n'
        '[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
        f'[policy]\nprograms = {json.dumps(TEST_PROGRAMS)}\nenv_keys = ["API_TOKEN"]\n'
        + principal_table("ci", "submitter")
        + principal_table("other", "submitter")
        + principal_table("viewer", "viewer", 'unix_users = ["nobody"]\n')
        + principal_table("burst", "submitter", "submits_per_minute = 2\n")
    )
    daemon = start_labd(config)
    yield Lab(daemon, shared / "api.sock", markers)
    daemon.stop()
    shutil.rmtree(shared)


def unix_request(
    path: Path, method: str, url: str, body: Any = None, uid: int | None = None
) -> tuple[int, Any]:
    """A request on the API's Unix socket, from this process or (uid given) from a child
    running as that account."""
    if uid is not None:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: become the account, ask, report through the pipe
            os.close(read)
            try:
                os.setgid(65534)
                os.setuid(uid)
                answer = unix_request(path, method, url, body)
            except BaseException as e:
                answer = (-1, repr(e))
            os.write(write, json.dumps(answer).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        os.waitpid(pid, 0)
        status, answer = json.loads(data)
        return int(status), answer
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    sock.connect(str(path))
    conn = http.client.HTTPConnection("localhost")
    conn.sock = sock
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if method == "POST" else {}
    conn.request(method, url, body=data, headers=headers)
    response = conn.getresponse()
    status, content = response.status, response.read()
    conn.close()
    return status, json.loads(content)

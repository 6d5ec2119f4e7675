"""The archives a job may name: under the shipped unit labd runs in `/`, and
replay.archive_dir defaulted to the working directory, so a submitter could have labd open any
file as its user and learn from the refusal whether it existed and was JSON. Now they are in
<state_dir>/archives and nothing that leads outside (`..`, a symbolic link) is opened."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from labd.replay.har import har_document, har_entry
from tests.conftest import TEST_PROGRAMS, LabdProcess


def _submit(daemon: LabdProcess, archive: str) -> tuple[int, Any]:
    spec = {
        "suite": "net",
        "test": "fetch",
        "scenario": "command",
        "iterations": 1,
        "warmup": 0,
        "params": {"command": ["true"]},
        "network": {"archive": archive, "profile": "none"},
    }
    return daemon.post("/api/v1/jobs", {"id": f"net-{uuid.uuid4().hex[:8]}", "spec": spec})


def test_archives_are_read_from_the_state_directory_and_nowhere_else(
    tmp_path: Path, start_labd: Any
) -> None:
    state = tmp_path / "state"
    config = tmp_path / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "t-{uuid.uuid4().hex[:10]}"\nstate_dir = "{state}"\n'
        'shutdown_grace = 3\n[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
        f"[mqtt]\nenabled = false\n[policy]\nprograms = {json.dumps(TEST_PROGRAMS)}\n"
    )
    # In `/`, as under systemd (WorkingDirectory defaults to the root directory).
    daemon: LabdProcess = start_labd(config, wrapper=["env", "--chdir=/"])
    archives = state / "archives"
    entry = har_entry("GET", "http://site.test/", [], b"", 200, "OK", [], b"page", "", 1)
    assert archives.stat().st_mode & 0o777 == 0o700  # made by labd, for the admin to fill
    (archives / "site.har").write_text(json.dumps(har_document([entry], "test")))
    (archives / "out.har").symlink_to(state / "credentials" / "local.toml")
    (archives / "nowhere.har").symlink_to(state / "credentials" / "no-such.toml")

    assert _submit(daemon, "site.har")[0] == 201
    secret = str(state / "credentials" / "local.toml").lstrip("/")  # relative to `/`
    status, answer = _submit(daemon, secret)
    assert status == 400
    assert answer["errors"] == [f"request: network.archive: no such file {archives / secret}"]
    # Outside, existing or not, through `..` or a link: the same refusal, nothing opened.
    refusals = {}
    for name in ("../credentials/local.toml", "../credentials/no-such.toml", "out.har",
                 "nowhere.har", "/etc/passwd", "../../../../../../../../etc/passwd"):  # fmt: skip
        status, answer = _submit(daemon, name)
        assert status == 400, name
        refusals[name] = answer["errors"]
    for name, errors in refusals.items():
        assert errors == [
            f"request: network.archive: {name!r} is outside replay.archive_dir ({archives})"
        ], name

"""What a job can reach of labd when labd runs as root, as the systemd unit has it run: its
programs run as policy.run_as (nobody), so they cannot read labd's credentials or database,
and labd's API socket does not take them for its local admin. An independent tester's job,
run as labd's own account under the unit as it was, did all three."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import LabdProcess
from tests.integration.test_disk_full import until

PROBE = """
import socket, sys
state, found = sys.argv[1], []
for name in ("credentials/local.toml", "labd.db"):
    try:
        open(f"{state}/{name}", "rb").read(1)
        found.append(f"{name}: read")
    except OSError as e:
        found.append(f"{name}: {type(e).__name__}")
api = socket.socket(socket.AF_UNIX)
api.connect(f"{state}/api.sock")
api.sendall(b"POST /api/v1/devices/any/drain HTTP/1.1\\r\\nHost: localhost\\r\\n"
            b"Content-Type: application/json\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
answer = api.recv(65536)
found.append("api: " + ("unknown_peer" if b"unknown_peer" in answer else repr(answer[:200])))
sys.exit("; ".join(found))
"""


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    """A directory any account may cross (pytest's own are root's alone), so that what stops
    the job is labd's modes, not the test's."""
    path = Path(tempfile.mkdtemp(prefix="labd-isolation-"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="labd drops jobs to another account as root only")
def test_a_job_reads_nothing_of_labds_and_its_api_socket_refuses_it(
    reachable_dir: Path, start_labd: Callable[..., LabdProcess]
) -> None:
    state = reachable_dir / "state"
    config = reachable_dir / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "isolation"\nstate_dir = "{state}"\nshutdown_grace = 3\n'
        '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
    )
    daemon = start_labd(config)
    spec = {
        "suite": "isolation",
        "test": "probe",
        "scenario": "command",
        "iterations": 1,
        "warmup": 0,
        "params": {"command": ["python3", "-c", PROBE, str(state)]},
    }
    assert daemon.post("/api/v1/jobs", {"id": "probe", "spec": spec})[0] == 201
    job = until(lambda: (j := daemon.get("/api/v1/jobs/probe")[1]["job"])["finished_at"] and j)
    assert job["state"] == "failed"  # the probe exits with what it found
    assert (
        "credentials/local.toml: PermissionError; labd.db: PermissionError; api: unknown_peer"
        in job["error"]
    ), job["error"]
    assert daemon.stop() == 0


@pytest.mark.parametrize(("euid", "principals", "warned"), [(1000, True, True), (0, True, False),
                                                            (1000, False, False)])  # fmt: skip
def test_labd_warns_when_a_labs_jobs_would_run_as_its_own_account(
    monkeypatch: pytest.MonkeyPatch, euid: int, principals: bool, warned: bool
) -> None:
    """As an ordinary account labd cannot drop its jobs to run_as: with principals besides the
    local admin, a job is then anyone's way to labd's credentials, and the log says so."""
    import structlog

    from labd.config import Settings
    from labd.daemon.app import _policy

    monkeypatch.setattr("labd.config.access.os.geteuid", lambda: euid)
    admitted = {"ci": {"role": "submitter", "token_sha256": ["0" * 64]}} if principals else {}
    settings = Settings.model_validate({"auth": {"principals": admitted}})
    with structlog.testing.capture_logs() as logs:
        _policy(settings, "labd.toml")
    found = [e for e in logs if e["event"].startswith("jobs run as labd's own account")]
    assert bool(found) is warned
    if warned:
        assert found[0]["principals"] == ["ci"] and found[0]["log_level"] == "warning"


HOLDER = """
import os, sys, time
where = sys.argv[1]
with open(f"{where}/holder.pid.part", "w") as out:
    out.write(str(os.getpid()))
# Whole or not at all: the peeker read an empty file once, and /proc//environ is no file.
os.rename(f"{where}/holder.pid.part", f"{where}/holder.pid")
deadline = time.monotonic() + 300  # a loaded machine may start the peeker late
while not os.path.exists(f"{where}/done") and time.monotonic() < deadline:
    time.sleep(0.05)
"""

PEEKER = """
import os, sys, time
where = sys.argv[1]
while not os.path.exists(f"{where}/holder.pid"):
    time.sleep(0.05)
pid = open(f"{where}/holder.pid").read()
try:
    open(f"/proc/{pid}/environ", "rb").read()
    found = "read"
except OSError as e:
    found = type(e).__name__
open(f"{where}/done", "w").close()
sys.exit(f"the other job's environment: {found}")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="labd drops jobs to another account as root only")
@pytest.mark.parametrize(
    ("run_as", "found"), [('"nobody"', "read"), ('["nobody", "daemon"]', "PermissionError")]
)
def test_jobs_side_by_side_with_an_account_each_cannot_read_each_others_environment(
    reachable_dir: Path, start_labd: Callable[..., LabdProcess], run_as: str, found: str
) -> None:
    shared = reachable_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # both jobs' accounts write here
    config = reachable_dir / "labd.toml"
    config.write_text(
        f'[daemon]\nlab = "isolation"\nstate_dir = "{reachable_dir / "state"}"\n'
        'shutdown_grace = 3\n[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
        '[mqtt]\nenabled = false\n[drivers.host]\nid = "side"\nslots = 2\n'
        f'[policy]\nprograms = ["python3"]\nrun_as = {run_as}\n'
    )
    daemon = start_labd(config)
    for name, program in (("holder", HOLDER), ("peeker", PEEKER)):
        spec = {
            "suite": "isolation",
            "test": name,
            "scenario": "command",
            "iterations": 1,
            "warmup": 0,
            "params": {"command": ["python3", "-c", program, str(shared)]},
        }
        assert daemon.post("/api/v1/jobs", {"id": name, "spec": spec})[0] == 201
    peeker = until(lambda: (j := daemon.get("/api/v1/jobs/peeker")[1]["job"])["finished_at"] and j)
    assert f"the other job's environment: {found}" in peeker["error"], peeker["error"]
    holder = until(lambda: (j := daemon.get("/api/v1/jobs/holder")[1]["job"])["finished_at"] and j)
    assert holder["state"] == "succeeded", holder
    assert daemon.stop() == 0

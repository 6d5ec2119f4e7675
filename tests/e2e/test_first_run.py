"""The README's first command, as a new user runs it: the daemon on its embedded defaults
(no configuration file), a real job submitted from the CLI, followed to its result table."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bare_env(tmp_path: Path) -> dict[str, str]:
    """A user's environment: no config file anywhere, state in a fresh directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LABD_")}
    env["LABD_DAEMON__STATE_DIR"] = str(tmp_path / "state")
    # Its own lab (topics and MQTT client id) on a shared broker; every other default stays.
    env["LABD_DAEMON__LAB"] = f"e2e-{uuid.uuid4().hex[:10]}"
    env["LABD_HTTP__PORT"] = str(free_port())
    env["LABD_HTTP__API_PORT"] = str(free_port())
    return env


def labd(
    env: dict[str, str], cwd: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labd", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def start_bare_daemon(env: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    log = (tmp_path / "daemon.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "labd", "run"],
        env=env,
        cwd=tmp_path,
        stderr=log,
        stdout=subprocess.DEVNULL,
    )


def test_a_real_job_end_to_end_on_embedded_defaults(
    bare_env: dict[str, str], tmp_path: Path
) -> None:
    # The daemon's own [perfherder] options: the CLI's export is the daemon's (a tester saw
    # the calling command's settings name another series than job.log's line).
    daemon_env = {**bare_env, "LABD_PERFHERDER__EXTRA_OPTIONS": '["lab-e2e"]'}
    daemon = start_bare_daemon(daemon_env, tmp_path)
    try:
        manifest = str(ROOT / "examples" / "host-python-startup.toml")
        result = labd(bare_env, tmp_path, "submit", manifest, "--wait")
        assert result.returncode == 0, result.stderr
        assert "host/python-startup on host-" in result.stdout and "succeeded" in result.stdout
        assert "wall_time_ms" in result.stdout and "cpu_time_ms" in result.stdout

        listed = json.loads(labd(bare_env, tmp_path, "jobs", "list", "--json").stdout)["jobs"]
        job_id = listed[0]["id"]
        raw = labd(bare_env, tmp_path, "jobs", "results", job_id, "--format", "csv").stdout
        rows = raw.strip().splitlines()
        assert rows[0] == "job_id,attempt,iteration,warmup,metric,value,error,variant,set_aside"
        assert len(rows) == 1 + 22 * 3  # 2 warm-up + 20 measured iterations, 3 metrics each
        state = Path(bare_env["LABD_DAEMON__STATE_DIR"])
        (logged,) = (state / "jobs" / job_id / "job.log").read_text().splitlines()
        assert '"extraOptions": ["' in logged and '"lab-e2e"]' in logged
        for via in ("api", "mqtt"):
            export = labd(
                bare_env,
                tmp_path,
                "jobs",
                "results",
                job_id,
                "--format",
                "perfherder",
                "--via",
                via,
            )
            assert (export.returncode, export.stdout) == (0, logged + "\n"), (via, export.stderr)
        devices = json.loads(labd(bare_env, tmp_path, "devices", "list", "--json").stdout)
        assert [d["state"] for d in devices["devices"]] == ["available"]
    finally:
        daemon.terminate()
        assert daemon.wait(30) == 0


def test_bad_submissions_are_refused_with_the_reason(
    bare_env: dict[str, str], tmp_path: Path
) -> None:
    daemon = start_bare_daemon(bare_env, tmp_path)
    try:
        missing = tmp_path / "missing.toml"
        missing.write_text(
            'suite = "s"\ntest = "t"\nscenario = "command"\n[params]\ncommand = ["nope-xyz"]\n'
        )
        result = labd(bare_env, tmp_path, "submit", str(missing))
        assert result.returncode == 2
        assert result.stderr.strip() == (
            "missing.toml: params.command: program 'nope-xyz' not found on this host"
        )
        android = tmp_path / "android.toml"
        android.write_text(
            'suite = "s"\ntest = "t"\nscenario = "command"\n[params]\n'
            'command = ["python3", "-c", "pass"]\n'
            '[device]\nplatform = "android"\n'
        )
        result = labd(bare_env, tmp_path, "submit", str(android))
        assert result.returncode == 2
        assert "no device in the lab matches platform=android" in result.stderr
        result = labd(bare_env, tmp_path, "jobs", "show", "no-such-job")
        assert (result.returncode, result.stderr.strip()) == (2, "no job 'no-such-job'")
        assert daemon.poll() is None
    finally:
        daemon.terminate()
        assert daemon.wait(30) == 0


def test_submit_without_a_daemon_says_so(bare_env: dict[str, str], tmp_path: Path) -> None:
    manifest = str(ROOT / "examples" / "host-python-startup.toml")
    result = labd(bare_env, tmp_path, "submit", manifest, "--via", "api", "--connect-wait", "0")
    assert result.returncode == 3
    assert "cannot reach the daemon" in result.stderr and "is `labd run` running?" in result.stderr
    # Over MQTT: a free port stands for a broker that is not there.
    env = {**bare_env, "LABD_MQTT__EMBEDDED_PORT": str(free_port())}
    result = labd(env, tmp_path, "submit", manifest, "--via", "mqtt", "--connect-wait", "1")
    assert result.returncode == 3
    assert (
        "cannot reach the MQTT broker" in result.stderr
        and "is `labd run` running?" in result.stderr
        and "`--via api` asks labd's own API instead" in result.stderr
    )


def test_a_bare_machine_without_any_broker(bare_env: dict[str, str], tmp_path: Path) -> None:
    """No broker listens: the daemon starts its embedded one, and a submit started at the
    same moment as the daemon waits for it rather than failing."""
    env = {**bare_env, "LABD_MQTT__EMBEDDED_PORT": str(free_port())}
    manifest = tmp_path / "quick.toml"
    manifest.write_text(
        'suite = "bare"\ntest = "true"\nscenario = "command"\niterations = 3\n'
        '[params]\ncommand = ["python3", "-c", "pass"]\n'
    )
    daemon = start_bare_daemon(env, tmp_path)
    try:
        result = labd(env, tmp_path, "submit", str(manifest), "--wait")
        assert result.returncode == 0, result.stderr
        assert "bare/true on host-" in result.stdout and "succeeded" in result.stdout
        assert "embedded mqtt broker listening" in (tmp_path / "daemon.log").read_text()
    finally:
        daemon.terminate()
        assert daemon.wait(30) == 0

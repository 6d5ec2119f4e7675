"""A real `labd run` subprocess: health, logs, signals and systemd notifications."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import LabdProcess, _in_thread, _pg_admin


def test_answers_health_readiness_and_metrics(start_labd: Any) -> None:
    daemon: LabdProcess = start_labd()
    code, health = daemon.get("/healthz")
    assert (code, health["status"]) == (200, "ok") and len(health["state_dir_id"]) == 16
    # Ready once its broker link is checked (labd's own status back from the broker), which
    # may come after its ports listen: under CI's load it was not there at the first ask.
    deadline = time.monotonic() + 30
    while (answer := daemon.get("/readyz"))[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    status, body = answer
    assert status == 200 and body["status"] == "ready", body
    status, text = daemon.get("/metrics")
    assert status == 200
    for name in (
        "labd_build_info",
        "labd_uptime_seconds",
        "labd_event_loop_lag_seconds_bucket",
        'labd_events_published_total{kind="daemon_started"}',
    ):
        assert name in text
    assert daemon.stop() == 0


def test_status_says_when_the_daemon_answering_is_not_this_configurations(
    start_labd: Any, labd_config: Path, tmp_path: Path
) -> None:
    """A second account's `labd status` said `healthz: ok` from the first account's daemon
    on the same port, and nothing of it (a tester's find); so did a configuration whose own
    daemon runs, asking another's port (a re-tester's)."""
    first: LabdProcess = start_labd()
    second_config = tmp_path / "second.toml"
    second_config.write_text(
        labd_config.read_text().replace(str(tmp_path / "state"), str(tmp_path / "second"))
    )
    second: LabdProcess = start_labd(second_config)

    def status(config: Path, port: int) -> str:
        asked = tmp_path / "asked.toml"
        asked.write_text(
            config.read_text().replace("port = 0\napi_port", f"port = {port}\napi_port")
        )
        command = [sys.executable, "-m", "labd", "--config", str(asked), "status"]
        return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout

    assert "note:" not in status(labd_config, first.port)
    said = status(second_config, first.port)  # its own daemon runs, on another port
    assert said.startswith("healthz: ok")
    note = "note: the daemon answering at http://127.0.0.1:{} does not run on this configuration's"
    assert note.format(first.port) in said and f"({tmp_path / 'second'})" in said
    nobody = labd_config.read_text().replace(str(tmp_path / "state"), str(tmp_path / "none"))
    (tmp_path / "nobody.toml").write_text(nobody)
    assert note.format(second.port) in status(tmp_path / "nobody.toml", second.port)
    assert first.stop() == 0 and second.stop() == 0


def test_piped_stderr_gets_json_lines(start_labd: Any, labd_config: Path) -> None:
    labd_config.write_text(labd_config.read_text().replace('format = "json"', 'format = "auto"'))
    daemon: LabdProcess = start_labd()
    started = daemon.wait_for_log("labd started")
    assert {"timestamp", "level", "logger", "event"} <= started.keys()
    assert daemon.stop() == 0
    assert all(line.startswith("{") for line in daemon.raw_log().splitlines())


def test_sigterm_stops_cleanly_within_grace(start_labd: Any) -> None:
    daemon: LabdProcess = start_labd()
    began = time.monotonic()
    daemon.signal(signal.SIGTERM)
    assert daemon.stop(timeout=10) == 0
    assert time.monotonic() - began < 5
    assert daemon.wait_for_log("labd stopping")["reason"] == "SIGTERM"
    daemon.wait_for_log("labd stopped")


def test_bad_sighup_reload_keeps_the_old_configuration(start_labd: Any, labd_config: Path) -> None:
    daemon: LabdProcess = start_labd()
    good = labd_config.read_text()
    labd_config.write_text(good + '[http2]\nport = "x"\n')
    daemon.signal(signal.SIGHUP)
    rejected = daemon.wait_for_log("configuration reload rejected; keeping the old one")
    assert rejected["problems"] == ["labd.toml: http2: unknown key (did you mean 'http'?)"]
    assert daemon.get("/healthz")[0] == 200

    # What only a restart used to find (a tester's reload was accepted, the reboot refused it).
    labd_config.write_text(good + "[drivers.host]\nslots = -5\n")
    lines = len(daemon.logs())
    daemon.signal(signal.SIGHUP)
    rejected = daemon.wait_for_log(
        "configuration reload rejected; keeping the old one", after=lines
    )
    (problem,) = rejected["problems"]
    assert problem.startswith("labd.toml: drivers.host.slots:"), problem

    labd_config.write_text(good.replace("[log]", '[log]\nlevel = "debug"'))
    daemon.signal(signal.SIGHUP)
    reloaded = daemon.wait_for_log("configuration reloaded")
    assert reloaded["applied"] == ["log.level"]
    assert daemon.stop() == 0


def test_speaks_the_systemd_notify_protocol(start_labd: Any, tmp_path: Path) -> None:
    address = str(tmp_path / "notify.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(address)
    server.settimeout(10)
    daemon: LabdProcess = start_labd(env={"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "200000"})
    messages = [server.recv(4096).decode() for _ in range(3)]
    assert any(m.startswith("READY=1") for m in messages)
    assert "WATCHDOG=1" in messages
    daemon.signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if server.recv(4096).decode().startswith("STOPPING=1"):
            break
    else:
        raise AssertionError("no STOPPING=1")
    assert daemon.stop() == 0
    server.close()


def test_sigterm_takes_no_new_job(start_labd: Any) -> None:
    """Jobs queued when SIGTERM comes stay queued for the next start; none is leased."""
    daemon: LabdProcess = start_labd()
    spec = {
        "suite": "s",
        "test": "t",
        "scenario": "command",
        "iterations": 2,
        "warmup": 0,
        "params": {"command": ["sleep", "0.3"]},
    }
    for n in range(5):
        assert daemon.post("/api/v1/jobs", {"id": f"q{n}", "spec": spec})[0] == 201
    daemon.wait_for_log("job leased")
    daemon.signal(signal.SIGTERM)
    stopping = daemon.wait_for_log("labd stopping")
    assert daemon.stop() == 0
    lines = daemon.logs()
    after = lines[lines.index(stopping) + 1 :]
    assert not [line for line in after if line["event"] == "job leased"]


def refused_start(config: Path) -> str:
    """`labd run` on `config`, which must stop at once with status 3: what it said."""
    second = subprocess.run(
        [sys.executable, "-m", "labd", "--config", str(config), "run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 3, second.stderr
    return second.stderr


def test_a_second_daemon_on_the_same_state_directory_stops_before_touching_anything(
    start_labd: Any, labd_config: Path
) -> None:
    """Started by mistake beside a running one, it took back the first's running job as its
    own, cut its MQTT session and marked its device offline before failing on the API socket."""
    first: LabdProcess = start_labd()
    refusal = refused_start(labd_config)
    assert f"another labd (pid {first.proc.pid}) runs on the state directory" in refusal
    assert "took back" not in refusal
    # A log line like any other (labd_config asks for JSON): jq and journald read it.
    last = json.loads(refusal.splitlines()[-1])
    assert (last["event"], last["level"], last["exit_code"]) == ("labd cannot run", "error", 3)
    assert first.get("/readyz")[0] == 200
    assert first.stop() == 0
    restarted: LabdProcess = start_labd()  # the lock went with the first daemon
    assert restarted.stop() == 0


def test_a_second_daemon_on_a_taken_port_stops_before_it_meets_the_broker(
    start_labd: Any, labd_config: Path, tmp_path: Path
) -> None:
    """Another account's labd on the same machine (same lab, same host name, same broker,
    its own state directory) connected to the broker as this host and published its
    devices and an `offline` host status before it found the side port taken."""
    first: LabdProcess = start_labd()
    first.wait_for_log("mqtt connected")
    second = tmp_path / "second.toml"
    second.write_text(
        labd_config.read_text()
        .replace(str(tmp_path / "state"), str(tmp_path / "second"))
        .replace("port = 0\napi_port", f"port = {first.port}\napi_port")
    )
    refusal = refused_start(second)
    assert f"http side port ([http] host and port): cannot listen on 127.0.0.1:{first.port}" in (
        refusal
    )
    events = [json.loads(line)["event"] for line in refusal.splitlines() if line.startswith("{")]
    for event in ("store migrated", "device appeared", "mqtt connected"):
        assert event not in events, events  # nothing opened, discovered or said
    assert first.get("/readyz")[0] == 200
    assert first.stop() == 0


def test_two_daemons_on_one_sqlite_file_are_refused(start_labd: Any, tmp_path: Path) -> None:
    """A second daemon with a state directory of its own but the first one's SQLite file (its
    store.url) took the first one's running job back as its own: the file is now held."""
    database = tmp_path / "shared.db"

    def config(name: str) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(
            f'[daemon]\nlab = "one-file"\nstate_dir = "{tmp_path / name}"\nshutdown_grace = 3\n'
            f'[store]\nurl = "sqlite+aiosqlite:///{database}"\n[http]\nport = 0\n'
            'api_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
        )
        return path

    first: LabdProcess = start_labd(config("a"))
    refusal = refused_start(config("b"))
    assert f"another labd uses the database {database}" in refusal
    assert first.get("/readyz")[0] == 200
    assert first.stop() == 0
    assert start_labd(config("b")).stop() == 0  # free once its holder stopped


def twin_config(tmp_path: Path, name: str, postgres_url: str) -> Path:
    """A daemon named 'twin' on the shared database, its state in tmp_path/name."""
    path = tmp_path / f"{name}.toml"
    path.write_text(
        f'[daemon]\nlab = "twins"\nhost = "twin"\nstate_dir = "{tmp_path / name}"\n'
        f'shutdown_grace = 3\n[store]\nurl = "{postgres_url}"\n[http]\nport = 0\n'
        'api_port = 0\n[log]\nformat = "json"\n[mqtt]\nenabled = false\n'
    )
    return path


def test_two_hosts_under_one_name_on_a_shared_database_are_refused(
    start_labd: Any, tmp_path: Path, postgres_url: str
) -> None:
    """A cloned machine started with the first one's daemon.host took its running job as its
    own and cost it an attempt: the second now stops before it opens its devices."""

    def config(name: str) -> Path:
        return twin_config(tmp_path, name, postgres_url)

    first: LabdProcess = start_labd(config("a"))
    # A database restart ends every session, and the lock with it (a tester's duplicate then
    # started): the first takes the name again as soon as the database answers.
    database = postgres_url.rsplit("/", 1)[1]
    _in_thread(
        _pg_admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{database}' AND pid <> pg_backend_pid()"
        )
    )
    first.wait_for_log("host name held again after the database came back", timeout=30)
    refusal = refused_start(config("b"))
    assert "another labd runs as host 'twin' on this database" in refusal
    assert first.get("/readyz")[0] == 200
    assert first.stop() == 0
    assert start_labd(config("b")).stop() == 0  # the name is free once its holder stopped


def test_a_host_whose_name_was_taken_while_the_database_was_away_stops_as_failed(
    start_labd: Any, tmp_path: Path, postgres_url: str
) -> None:
    """A database restart ends the name's lock; should another labd take the name before this
    one takes it back, this one stops, and with a failure's exit status (it said 0, so a
    supervisor saw a clean stop and systemd's Restart=on-failure never tried again)."""
    import asyncio

    import asyncpg

    from labd.store.hostname import host_key

    first: LabdProcess = start_labd(twin_config(tmp_path, "a", postgres_url))
    database = postgres_url.rsplit("/", 1)[1]

    async def restart_and_take_the_name() -> None:
        # The restart, as the daemon sees it (its sessions end), and a twin in the gap: labd
        # tries to take its name back every 2 s.
        twin = await asyncpg.connect(host="localhost", user="postgres", database=database)
        await twin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND pid <> pg_backend_pid()",
            database,
        )
        await twin.execute("SELECT pg_advisory_lock($1)", host_key("twin"))
        try:
            await asyncio.to_thread(first.proc.wait, 30)
        finally:
            await twin.close()

    asyncio.run(restart_and_take_the_name())
    assert first.wait_for_log("another labd took this host's name; stopping")
    assert first.stop() == 3

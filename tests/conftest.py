"""Shared fixtures: real services found on their standard ports, and a real `labd run`."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REQUIRE_SERVICES = os.environ.get("LABD_REQUIRE_SERVICES") == "1"
# What test daemons may run (the job policy allows these programs and nothing else).
TEST_PROGRAMS = ["sleep", "true", "python3", "touch", sys.executable]


def tests_logging() -> None:
    """What runs in-process logs as `labd run` does at a terminal. structlog's own default
    renders tracebacks with rich: seconds of CPU each with the event loop stopped, which under
    load starved a test's lease heartbeats. Loggers are not cached, so a test's
    `capture_logs` sees a module logger another test has used before."""
    import structlog

    from labd.logs import configure_logging

    configure_logging("info", "console")
    structlog.configure(cache_logger_on_first_use=False)


def pytest_configure(config: pytest.Config) -> None:
    tests_logging()


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """A test that configures logging itself (JSON, a level, secrets, a `capsys` stream that
    closes when it ends) leaves the next test the usual configuration."""
    yield
    tests_logging()


def policy_for_tests(*more_programs: str, **changes: Any) -> Any:
    """The job policy of test daemons (plus `more_programs`), for tests that run a scenario
    themselves."""
    import dataclasses

    from labd.model import Policy

    programs = [*TEST_PROGRAMS, *more_programs]
    policy = Policy.resolve(programs, "/usr/local/bin:/usr/bin:/bin", [], "nobody", euid=1)
    return dataclasses.replace(policy, **changes)


def service_available(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def need_service(name: str, host: str, port: int) -> None:
    """Skip (or fail when LABD_REQUIRE_SERVICES=1) unless the service answers."""
    if service_available(host, port):
        return
    reason = f"{name} is not reachable on {host}:{port}"
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} and LABD_REQUIRE_SERVICES=1")
    pytest.skip(reason)


def process_alive(pid: int) -> bool:
    """Running, not a zombie waiting for its (new) parent to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


STARTS_WITHIN_S = 60.0


class LabdProcess:
    """A real `labd run` subprocess with its stderr (JSON log lines) collected to a file.

    `get` and `post` reach /api paths on the API's TCP port with the local admin's bearer
    token (the credentials labd writes in its state directory), other paths on the side port.
    """

    def __init__(
        self, config: Path, env: dict[str, str] | None = None, wrapper: list[str] | None = None
    ) -> None:
        self.config = config
        self.log_path = config.with_suffix(".log")
        self._log_file = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [*(wrapper or []), sys.executable, "-m", "labd", "--config", str(config), "run"],
            stdout=subprocess.DEVNULL,
            stderr=self._log_file,
            env={**os.environ, **(env or {})},
        )
        try:
            # A daemon that does not start at all fails here; on a loaded machine a start-up
            # (imports, the store, the broker) takes well over 15 s.
            self.port = int(self.wait_for_log("http side port listening", STARTS_WITHIN_S)["port"])
            api = self.wait_for_log("http api listening", STARTS_WITHIN_S)
        except BaseException:
            self.kill()  # not left running when the test fails to start it
            raise
        self.api_port = int(api["port"]) if api.get("port") else None
        self.socket = Path(api["socket"])

    api_token: str | None = None  # another principal's token for /api, if set

    @property
    def token(self) -> str:
        """The bearer token for /api: `api_token`, else the local admin's (labd wrote it on
        its first start)."""
        import tomllib

        if self.api_token:
            return self.api_token

        state_dir = tomllib.loads(self.config.read_text())["daemon"]["state_dir"]
        path = Path(state_dir) / "credentials" / "local.toml"
        return str(tomllib.loads(path.read_text())["token"])

    def url(self, path: str) -> str:
        port = self.api_port if path.startswith("/api/") else self.port
        return f"http://127.0.0.1:{port}{path}"

    def _headers(self, path: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if path.startswith("/api/") else {}

    def logs(self) -> list[dict[str, Any]]:
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]

    def raw_log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, event: str, timeout: float = 15.0, after: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.logs()[after:]:
                if line.get("event") == event:
                    return line
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no log line {event!r}; log so far:\n{self.raw_log()}")

    def get(self, path: str) -> tuple[int, Any]:
        try:
            request = urllib.request.Request(self.url(path), headers=self._headers(path))
            with urllib.request.urlopen(request, timeout=5) as r:
                body = r.read()
                status = r.status
        except urllib.error.HTTPError as e:
            body, status = e.read(), e.code
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode()

    def post(self, path: str, body: Any = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.url(path),
            data=json.dumps(body or {}).encode(),
            method="POST",
            headers={"Content-Type": "application/json", **self._headers(path)},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log_file.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log_file.close()


@pytest.fixture
def small_disk() -> Iterator[Any]:
    """Call with a folder and a size in MiB: a real tmpfs of that size is mounted there (a disk
    a test can fill to the last byte), unmounted after. Skips where mounting is not allowed."""
    mounted: list[Path] = []

    def mount(folder: Path, size_mb: int) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        options = f"size={size_mb}m,mode=0755"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(folder)
        return folder

    yield mount
    for folder in mounted:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_to_the_last_byte(path: Path) -> None:
    """Write `path` until its file system has no byte left (a megabyte, a page, a byte at a
    time)."""
    import errno

    with path.open("wb", buffering=0) as filler:
        for chunk in (2**20, 4096, 1):
            try:
                while True:
                    filler.write(b"x" * chunk)
            except OSError as e:
                assert e.errno == errno.ENOSPC


@pytest.fixture
def labd_config(tmp_path: Path) -> Iterator[Path]:
    """A config file for a private daemon: free port, state in tmp_path, short grace."""
    path = tmp_path / "labd.toml"
    path.write_text(
        f'[daemon]\nlab = "t-{uuid.uuid4().hex[:10]}"\n'
        f'state_dir = "{tmp_path / "state"}"\nshutdown_grace = 5\n'
        '[http]\nport = 0\napi_port = 0\n[log]\nformat = "json"\n'
        f"[policy]\nprograms = {json.dumps(TEST_PROGRAMS)}\n"
    )
    yield path


@pytest.fixture
def start_labd(labd_config: Path) -> Iterator[Any]:
    """Call to start a real daemon on labd_config; every one started is stopped after."""
    started: list[LabdProcess] = []

    def start(
        config: Path | None = None,
        env: dict[str, str] | None = None,
        wrapper: list[str] | None = None,
    ) -> LabdProcess:
        process = LabdProcess(config or labd_config, env, wrapper)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


POSTGRES = ("127.0.0.1", 5432)


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(
        host=POSTGRES[0], port=POSTGRES[1], user="postgres", database="test"
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _in_thread(coro: Any) -> None:
    # Fixtures may be set up while an event loop runs; asyncpg gets a loop of its own.
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coro).result()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    import uuid

    need_service("PostgreSQL", *POSTGRES)
    name = f"labd_test_{uuid.uuid4().hex[:12]}"
    _in_thread(_pg_admin(f'CREATE DATABASE "{name}"'))
    yield f"postgresql+asyncpg://postgres@{POSTGRES[0]}:{POSTGRES[1]}/{name}"
    _in_thread(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """An empty store on SQLite and on PostgreSQL: the same suite runs against both."""
    from labd.store import Store

    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp_path / 'labd.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    opened = await Store.open(url)
    yield opened
    await opened.close()


def need_program(name: str) -> str:
    """The program's path; skip (or fail when LABD_REQUIRE_SERVICES=1) when it is missing."""
    import shutil

    path = shutil.which(name)
    if path is not None:
        return path
    reason = f"{name} is not installed"
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} and LABD_REQUIRE_SERVICES=1")
    pytest.skip(reason)


@pytest.fixture
def xvfb() -> Iterator[str]:
    """A private Xvfb display (640x480, 24 bit); yields its name, e.g. ':57'."""
    program = need_program("Xvfb")
    read_end, write_end = os.pipe()
    # -displayfd: Xvfb picks a free display and writes its number when it is ready.
    process = subprocess.Popen(
        [program, "-displayfd", str(write_end), "-screen", "0", "640x480x24", "-nolisten", "tcp"],
        pass_fds=(write_end,),
        stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        number = ready.readline().strip()
    try:
        assert number, "Xvfb did not start"
        yield f":{number}"
    finally:
        process.terminate()
        process.wait(10)

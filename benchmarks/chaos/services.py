"""Private PostgreSQL and Mosquitto instances for one chaos run: free ports, temp dirs.

The harness restarts them as faults, so it never touches the machine's shared servers.
PostgreSQL comes from Debian's binaries (/usr/lib/postgresql/<version>/bin); as root, its
tools run as the `postgres` user, since initdb and postgres refuse to run as root.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:g} s")


def _pg_bin() -> Path:
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not versions:
        raise RuntimeError("no PostgreSQL server binaries (apt-get install postgresql)")
    return versions[-1].parent


class PrivatePostgres:
    """A throw-away cluster on a free port; `restart()` is the fault."""

    def __init__(self, root: Path) -> None:
        self.bin = _pg_bin()
        self.data = root / "pgdata"
        self.socket_dir = root / "pgsock"
        self.port = free_port()
        self.log = root / "postgres.log"
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            for d in (root,):
                shutil.chown(d, "postgres")
        self.socket_dir.mkdir()
        if self._as:
            shutil.chown(self.socket_dir, "postgres")

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        done = subprocess.run([*self._as, *args], capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{Path(args[0]).name} failed: {done.stderr.strip()[-500:]}")

    def start(self) -> None:
        if not self.data.exists():
            self._run(
                str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                "--no-sync",
            )  # fmt: skip
        options = (
            f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 "
            "-c max_connections=200 -c fsync=off"
        )
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options,
            "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """A fast shutdown (every connection cut, in-flight transactions rolled back), then up."""
        self.stop()
        self.start()


class PrivateMosquitto:
    """A broker on a free port with persistence, so a restart keeps retained messages and
    the queued messages of persistent sessions (as a production broker would)."""

    def __init__(self, root: Path) -> None:
        self.root = root / "mosquitto"
        self.root.mkdir()
        self.port = free_port()
        self.conf = self.root / "mosquitto.conf"
        user = "mosquitto" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            shutil.chown(self.root, user)
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
            f"persistence true\npersistence_location {self.root}/\n"
            "max_queued_messages 100000\nmax_inflight_messages 100\n"
            f"user {user}\nlog_dest file {self.root}/mosquitto.log\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["mosquitto", "-c", str(self.conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_port(self.port)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: Mosquitto saves its persistence file
            self.proc.wait(30)

    def restart(self) -> None:
        self.stop()
        self.start()

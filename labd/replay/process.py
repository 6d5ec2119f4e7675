"""A replay server in a process of its own, for one job: started before the iterations and
stopped after, so serving never competes with the scheduler's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import signal
import sys
from pathlib import Path
from typing import Any

import structlog

from labd.errors import EXIT_USAGE, CannotStart, InfrastructureError
from labd.replay.shaping import PROFILES, Profile

log = structlog.get_logger("labd.replay")

PR_SET_PDEATHSIG = 1  # prctl(2) option
LINE_LIMIT = 1000  # characters of a server's log line carried into labd's log
LINE_BUFFER = 2**20  # the longest line read from the server (its listening line names skips)
LEVELS = ("debug", "info", "warning", "error")
NOT_RELAYED = ("timestamp", "logger", "port")
_LIBC = ctypes.CDLL(None)  # loaded here: dlopen takes locks, not safe after fork


class ReplayProcess:
    def __init__(
        self,
        archive: Path,
        profile: Profile,
        host: str = "127.0.0.1",
        port: int = 0,
        ca: Path | None = None,
        ignore_params: tuple[str, ...] = (),
    ) -> None:
        self.command = [
            sys.executable,
            "-m",
            "labd",
            "--log-format",
            "json",
            "replay",
            "serve",
            str(archive),
        ]
        self.command += ["--host", host, "--port", str(port)]
        if PROFILES.get(profile.name) == profile:
            self.command += ["--profile", profile.name]
        else:
            self.command += [
                "--latency-ms",
                str(profile.latency_ms),
                "--down-kbps",
                str(profile.down_kbps),
            ]
            self.command += [
                "--up-kbps",
                str(profile.up_kbps),
                "--jitter-ms",
                str(profile.jitter_ms),
            ]
            self.command += ["--loss", str(profile.loss)]
        if ca is not None:
            self.command += ["--ca", str(ca)]
        for name in ignore_params:
            self.command += ["--ignore-param", name]
        self.process: asyncio.subprocess.Process | None = None
        self.ready: dict[str, Any] = {}
        self._said: asyncio.Task[None] | None = None
        self._last_said = ""  # the server's last line on stderr: why it stopped, if it did

    @property
    def port(self) -> int:
        return int(self.ready["listening"])

    async def start(self, ready_within: float = 60.0) -> dict[str, Any]:
        """Start and wait until it listens; its own error message when it cannot: CannotStart
        for what the job gave it (an archive that does not load), else InfrastructureError."""
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_labd,
            limit=LINE_BUFFER,
        )
        assert self.process.stdout is not None and self.process.stderr is not None
        # Read as it comes, from the start: a pipe nobody reads fills, and the server stalls
        # on its next line (an archive's skipped entries, said before it listens, did).
        self._said = asyncio.get_running_loop().create_task(self._relay(self.process.stderr))
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), ready_within)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise InfrastructureError(
                f"replay server did not listen within {ready_within:.0f} s"
            ) from None
        if not line:
            status = await self.process.wait()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._said, 5)
            reason = self._last_said or "no output"
            if status == EXIT_USAGE:  # the job's archive: not the device's fault
                raise CannotStart(f"replay server: {reason}")
            raise InfrastructureError(f"replay server failed: {reason}")
        self.ready = json.loads(line)
        return self.ready

    async def tally(self, within: float = 5.0) -> dict[str, Any]:
        """What it has served and missed so far (`served`, `missed`, `last_miss`), asked for
        by SIGUSR1; {} when it does not answer in time."""
        if self.process is None or self.process.returncode is not None:
            return {}
        assert self.process.stdout is not None
        self.process.send_signal(signal.SIGUSR1)
        with contextlib.suppress(TimeoutError, ValueError):
            async with asyncio.timeout(within):
                while line := await self.process.stdout.readline():
                    if line.startswith(b'{"tally"'):
                        return dict(json.loads(line)["tally"])
        return {}

    async def _relay(self, stderr: asyncio.StreamReader) -> None:
        """The server's log lines (JSON) into labd's log, one event each, at their level."""
        while line := await stderr.readline():
            text = line.decode(errors="replace").strip()
            self._last_said = text
            try:
                said = dict(json.loads(text))
            except (ValueError, TypeError):
                said = {"event": text}
            event = str(said.pop("event", ""))[:LINE_LIMIT]
            level = said.pop("level", "info")
            say = getattr(log, level if level in LEVELS else "info")
            fields = {k: str(v)[:LINE_LIMIT] for k, v in said.items() if k not in NOT_RELAYED}
            say("replay server: " + event, port=self.ready.get("listening"), **fields)

    async def stop(self, grace: float = 10.0) -> dict[str, Any]:
        """Stop it; what it served and missed."""
        if self.process is None or self.process.returncode is not None:
            return {}
        assert self.process.stdout is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            rest = await asyncio.wait_for(self.process.stdout.read(), grace)
            await asyncio.wait_for(self.process.wait(), grace)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            return {}
        finally:
            if self._said is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._said, 2)
        lines = [
            line for line in rest.decode(errors="replace").splitlines() if line.startswith("{")
        ]
        return json.loads(lines[-1]) if lines else {}


def _die_with_labd() -> None:
    """Between fork and exec: the server gets SIGKILL when the thread that started it (the
    event loop's, which lives as long as labd) ends, so a killed labd leaves no server holding
    its port. A plain system call: no Python locks between fork and exec."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

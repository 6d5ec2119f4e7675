"""The `command` scenario: run a program N times; record wall time, CPU time and peak memory.

The program is started without a shell (arguments as a list), so nothing in a manifest is
ever interpreted by one. Stabilisation from Larres et al. (seed 000) is optional and recorded:
pinning to one CPU, ASLR disabled for the child, a tmpfs working directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from labd.errors import InfrastructureError, TestFailure
from labd.model import MetricSpec, Policy, Scenario
from labd.model.policy import ProgramNotFound
from labd.runner.child import child_setup
from labd_host.probe import environment

TMPFS_ROOT = Path("/dev/shm")
STDERR_TAIL = 400  # characters of the program's stderr kept in a failed iteration's error


class CommandParams(BaseModel):
    """Parameters of the `command` scenario (`[params]` in a manifest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[str] = Field(
        min_length=1, description="Program and arguments, as a list; no shell is involved."
    )
    cwd: str = Field("", description="Working directory; empty: a fresh directory per job.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cpu: int | None = Field(None, ge=0, description="Pin the program to this CPU.")
    disable_aslr: bool = Field(False, description="Run the program without ASLR.")
    tmpfs: bool = Field(False, description="Run in a fresh directory on tmpfs (/dev/shm).")
    iteration_timeout_s: float = Field(600, gt=0, description="Time-out of one run.")
    ok_exit_codes: list[int] = Field(default_factory=lambda: [0], min_length=1)


@dataclass(frozen=True)
class RunResult:
    wall_s: float
    cpu_s: float
    max_rss_kib: int
    exit_code: int
    stderr_tail: str


class CommandScenario(Scenario):
    name = "command"
    Params = CommandParams
    default_metrics = (
        MetricSpec(name="wall_time_ms", unit="ms"),
        MetricSpec(name="cpu_time_ms", unit="ms"),
        MetricSpec(name="max_rss_kib", unit="KiB"),
    )

    @property
    def p(self) -> CommandParams:
        assert isinstance(self.params, CommandParams)
        return self.params

    @classmethod
    def check(cls, params: BaseModel) -> list[str]:
        assert isinstance(params, CommandParams)
        problems = []
        program = params.command[0]
        if shutil.which(program) is None:
            problems.append(f"params.command: program {program!r} not found on this host")
        allowed = os.sched_getaffinity(0)
        if params.cpu is not None and params.cpu not in allowed:
            problems.append(f"params.cpu: CPU {params.cpu} is not one of {sorted(allowed)}")
        if params.tmpfs and params.cwd:
            problems.append("params.tmpfs: cannot be combined with params.cwd")
        if params.tmpfs and not os.access(TMPFS_ROOT, os.W_OK):
            problems.append(f"params.tmpfs: {TMPFS_ROOT} is not writable here")
        if params.cwd and not Path(params.cwd).is_dir():
            problems.append(f"params.cwd: {params.cwd!r} is not a directory")
        return problems

    @classmethod
    def policy_problems(cls, params: BaseModel, policy: Policy) -> list[str]:
        assert isinstance(params, CommandParams)
        problems = policy.env_problems(params.env)
        try:
            policy.program(params.command[0])
        except ProgramNotFound as e:
            if shutil.which(params.command[0]) is not None:  # else `check` said so already
                problems.insert(0, f"command: {e}")
        except ValueError as e:
            problems.insert(0, f"command: {e}")
        return [f"params.{p}" for p in problems]

    async def setup(self) -> None:
        await asyncio.to_thread(self._prepare)  # file system and /proc reads: off the loop
        self._preexec = child_setup(
            None if self.p.cpu is None else {self.p.cpu}, self.p.disable_aslr
        )

    def _prepare(self) -> None:
        if self.p.tmpfs:
            self.workdir = Path(tempfile.mkdtemp(prefix="labd-", dir=TMPFS_ROOT))
        else:
            self.workdir = Path(self.p.cwd) if self.p.cwd else self.ctx.workdir
            self.workdir.mkdir(parents=True, exist_ok=True)
        self.ctx.fingerprint.update(
            environment(),
            stabilisation={
                "cpu_affinity": [self.p.cpu] if self.p.cpu is not None else "all",
                "aslr": "disabled" if self.p.disable_aslr else "enabled",
                "workdir": f"tmpfs:{self.workdir}" if self.p.tmpfs else str(self.workdir),
            },
        )

    async def run_iteration(self, index: int) -> dict[str, float]:
        env = {**os.environ, **_proxy_env(self.ctx.network), **self.p.env}
        runner = _Run(self.p.command, self.workdir, env, self._preexec)
        try:
            result = await asyncio.to_thread(runner.run, self.p.iteration_timeout_s)
        except asyncio.CancelledError:
            runner.kill()
            raise
        if result.exit_code not in self.p.ok_exit_codes:
            detail = f": {result.stderr_tail}" if result.stderr_tail else ""
            raise TestFailure(f"exit status {result.exit_code}{detail}")
        return {
            "wall_time_ms": result.wall_s * 1000,
            "cpu_time_ms": result.cpu_s * 1000,
            "max_rss_kib": float(result.max_rss_kib),
        }

    async def teardown(self) -> None:
        if self.p.tmpfs:
            await asyncio.to_thread(shutil.rmtree, self.workdir, True)


class _Run:
    """One run of the program in a worker thread, measured with wait4's resource usage."""

    def __init__(
        self, argv: list[str], cwd: Path, env: dict[str, str], preexec: Callable[[], None]
    ) -> None:
        self.argv, self.cwd, self.env, self.preexec = argv, cwd, env, preexec
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def run(self, timeout: float) -> RunResult:
        with tempfile.TemporaryFile() as stderr:
            start = time.perf_counter()
            try:
                with self._lock:
                    self._proc = subprocess.Popen(
                        self.argv,
                        cwd=self.cwd,
                        env=self.env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=stderr,
                        preexec_fn=self.preexec,  # only affinity and personality calls
                        start_new_session=True,
                    )
            except (OSError, subprocess.SubprocessError) as e:
                raise InfrastructureError(f"cannot start {self.argv[0]!r}: {e}") from e
            timer = threading.Timer(timeout, self.kill)
            timer.start()
            try:
                _, status, usage = os.wait4(self._proc.pid, 0)
            finally:
                timer.cancel()
            wall = time.perf_counter() - start
            self._proc.returncode = code = os.waitstatus_to_exitcode(status)
            stderr.seek(0)
            tail = stderr.read()[-STDERR_TAIL:].decode(errors="replace").strip()
        if code == -signal.SIGKILL and wall >= timeout:
            raise TestFailure(f"timed out after {timeout:g} s")
        return RunResult(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, code, tail)

    def kill(self) -> None:
        """Kill the program and anything it started (its own process group)."""
        with self._lock:
            if self._proc is not None and self._proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)


def _proxy_env(network: dict[str, str]) -> dict[str, str]:
    """The job's replay server as the proxy, in the variables programs look for."""
    if not network:
        return {}
    proxy = network["proxy"]
    names = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "LABD_REPLAY_PROXY")
    return {name: proxy for name in names} | {"no_proxy": "", "NO_PROXY": ""}

"""The `command` scenario: run a program N times; record wall time, CPU time and peak memory.

The program is started without a shell (arguments as a list), so nothing in a manifest is
ever interpreted by one, and through labd's launcher, so its figures are its own (not labd's
memory folded into its peak). Stabilisation from Larres et al. is optional and recorded:
pinning to one CPU, ASLR disabled for the child, a tmpfs working directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import structlog
from pydantic import BaseModel, ConfigDict, Field

from labd.process import Launch, launcher_command, program_env
from labd.sdk import MetricSpec, Policy, ProgramNotFound, Scenario, TestFailure
from labd_host.probe import environment, program_identity
from labd_host.tuning import Tuning, tune

log = structlog.get_logger("labd.host")

TMPFS_ROOT = Path("/dev/shm")
# What a job's own arguments and variables may take: Linux caps each string at 128 KiB and the
# whole of argv and the environment at a quarter of the stack limit (2 MiB by default); labd's
# launcher and the base environment need their share of it.
MAX_EXEC_BYTES = 128 * 1024
STDERR_TAIL = 400  # characters of the program's stderr kept in a failed iteration's error
MAX_ITERATION_TIMEOUT_S = 7 * 24 * 3600.0  # a job's own time-out cannot be longer either
STRAYS = "stray_processes_ended"  # fingerprint key: what the program left running, ended


class CommandParams(BaseModel):
    """Parameters of the `command` scenario (`[params]` in a manifest)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    command: list[str] = Field(
        min_length=1, description="Program and arguments, as a list; no shell is involved."
    )
    cwd: str = Field(
        "",
        description="Working directory, an absolute path the job's account can enter; empty: "
        "a fresh directory per job.",
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cpu: int | None = Field(None, ge=0, description="Pin the program to this CPU.")
    disable_aslr: bool = Field(False, description="Run the program without ASLR.")
    tmpfs: bool = Field(False, description="Run in a fresh directory on tmpfs (/dev/shm).")
    iteration_timeout_s: float = Field(600, gt=0, description="Time-out of one run.")
    host_tuning: bool = Field(
        True,
        description="Performance governor and no turbo/boost for the job, restored after "
        "(where the host allows it; recorded either way).",
    )
    # What wait4 can report: 0-255, or minus a signal number.
    ok_exit_codes: list[Annotated[int, Field(ge=-64, le=255)]] = Field(
        default_factory=lambda: [0], min_length=1
    )


class CommandScenario(Scenario[CommandParams]):
    name = "command"
    tuning: Tuning | None = None
    default_metrics = (
        MetricSpec(name="wall_time_ms", unit="ms"),
        MetricSpec(name="cpu_time_ms", unit="ms"),
        MetricSpec(name="max_rss_kib", unit="KiB"),
    )

    @classmethod
    def check(cls, params: CommandParams) -> list[str]:
        problems = _unstartable(params)
        allowed = os.sched_getaffinity(0)
        if params.cpu is not None and params.cpu not in allowed:
            problems.append(f"params.cpu: CPU {params.cpu} is not one of {sorted(allowed)}")
        if params.tmpfs and params.cwd:
            problems.append("params.tmpfs: cannot be combined with params.cwd")
        if params.tmpfs and not os.access(TMPFS_ROOT, os.W_OK):
            problems.append(f"params.tmpfs: {TMPFS_ROOT} is not writable here")
        if params.cwd and not Path(params.cwd).is_absolute():
            problems.append(f"params.cwd: {params.cwd!r} is not an absolute path")
        if params.iteration_timeout_s > MAX_ITERATION_TIMEOUT_S:
            # threading.Timer cannot wait that long (OverflowError in its thread): the
            # iteration would silently have no time-out at all.
            problems.append(
                f"params.iteration_timeout_s: at most {MAX_ITERATION_TIMEOUT_S:g} s, "
                f"got {params.iteration_timeout_s:g}"
            )
        return problems

    @classmethod
    def policy_problems(cls, params: CommandParams, policy: Policy) -> list[str]:
        problems = policy.env_problems(params.env)
        # Whether the job's own account can enter it is known when it runs, as that account:
        # labd (root) looking now would answer for itself, and tell a submitter what exists
        # where it may not look (/root/.ssh). Run as labd's own account, the answer is the job's.
        cwd = Path(params.cwd)
        unseen = policy.run_as is not None or not cwd.is_absolute() or "\0" in params.cwd
        if not unseen and not cwd.is_dir():
            problems.append(f"cwd: {params.cwd!r} is not a directory")
        try:
            policy.program(params.command[0])
        except ProgramNotFound as e:
            if shutil.which(params.command[0]) is not None:  # else `check` said so already
                problems.insert(0, f"command: {e}")
        except ValueError as e:
            problems.insert(0, f"command: {e}")
        return [f"params.{p}" for p in problems]

    async def setup(self) -> None:
        await asyncio.to_thread(self._prepare)  # file system, /proc reads, maybe a compile

    def _prepare(self) -> None:
        run_as = self.ctx.policy.run_as
        if self.params.tmpfs:
            self.workdir = Path(tempfile.mkdtemp(prefix="labd-", dir=TMPFS_ROOT))
        else:
            self.workdir = Path(self.params.cwd) if self.params.cwd else self.ctx.workdir
            if not self.params.cwd:  # a submitter's directory is never made, by root least
                self.workdir.mkdir(parents=True, exist_ok=True)
        if run_as is not None and (self.params.tmpfs or not self.params.cwd):
            run_as.give(self.workdir)  # labd made it for the program
        self.tuning = tune() if self.params.host_tuning else None
        tuned = (
            self.tuning.record
            if self.tuning
            else {"cpu_governor": "not asked", "turbo": "not asked"}
        )
        _, launcher = launcher_command()
        with contextlib.suppress(ValueError):  # refused or gone since: each iteration says
            program = self.ctx.policy.program(self.params.command[0])
            self.ctx.fingerprint["program"] = program_identity(program)
        self.ctx.fingerprint.update(
            environment(),
            launcher=launcher,
            run_as=self.ctx.policy.run_as_record(),
            run_as_account=run_as.name if run_as else "",
            stabilisation={
                "cpu_affinity": [self.params.cpu] if self.params.cpu is not None else "all",
                "aslr": "disabled" if self.params.disable_aslr else "enabled",
                "workdir": f"tmpfs:{self.workdir}" if self.params.tmpfs else str(self.workdir),
                **tuned,
            },
        )

    async def run_iteration(self, index: int) -> dict[str, float]:
        policy = self.ctx.policy
        try:  # checked at submit; the policy may have changed since (a restart)
            program = policy.program(self.params.command[0])
        except ValueError as e:
            raise TestFailure(f"params.command: {e}") from e
        if refused := policy.env_problems(self.params.env):
            raise TestFailure("; ".join(f"params.{p}" for p in refused))
        env = {**_base_env(policy), **_proxy_env(self.ctx.network), **self.params.env}
        with tempfile.TemporaryFile() as stderr:
            launch = Launch(
                [program, *self.params.command[1:]],
                cwd=self.workdir,
                env=env,
                cpus=None if self.params.cpu is None else {self.params.cpu},
                disable_aslr=self.params.disable_aslr,
                run_as=self.ctx.policy.run_as,
                submitted_cwd=bool(self.params.cwd),
                timeout_s=self.params.iteration_timeout_s,
                stderr=stderr,
            )
            self.ctx.fingerprint.pop(STRAYS, None)  # the last iteration's count is not this one's
            try:
                usage = await asyncio.to_thread(launch.run)
            except asyncio.CancelledError:
                await asyncio.to_thread(launch.stop)
                raise
            self._note_strays(index, usage.strays)
            stderr.seek(0)
            tail = stderr.read()[-STDERR_TAIL:].decode(errors="replace").strip()
        values = {
            "wall_time_ms": usage.wall_s * 1000,
            "cpu_time_ms": usage.cpu_s * 1000,
            "max_rss_kib": float(usage.max_rss_kib),
        }
        if usage.timed_out:
            # A killed run's figures describe the kill, not the program: kept, set aside.
            self.ctx.flags.append(
                f"timed out after {self.params.iteration_timeout_s:g} s (the run was killed)"
            )
            return values
        if usage.exit_code not in self.params.ok_exit_codes:
            detail = f": {tail}" if tail else ""
            raise TestFailure(f"exit status {usage.exit_code}{detail}")
        return values

    def _note_strays(self, index: int, strays: int) -> None:
        """Recorded on the iteration either way: a program that leaves processes behind would
        have them compete with the next iteration (the launcher ended them)."""
        self.ctx.fingerprint[STRAYS] = strays
        if strays:
            log.warning(
                "the program left processes running; the launcher ended them",
                job_id=self.ctx.job_id,
                iteration=index,
                count=strays,
            )

    async def teardown(self) -> None:
        if self.tuning is not None and (problems := await asyncio.to_thread(self.tuning.restore)):
            log.warning("host settings not restored", problems=problems)
        if self.params.tmpfs:
            await asyncio.to_thread(shutil.rmtree, self.workdir, True)


def _base_env(policy: Policy) -> dict[str, str]:
    home = policy.run_as.home if policy.run_as else os.environ.get("HOME", "/")
    return program_env(policy.path, home)


def _proxy_env(network: dict[str, str]) -> dict[str, str]:
    """The job's replay server as the proxy, in the variables programs look for."""
    if not network:
        return {}
    proxy = network["proxy"]
    names = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "LABD_REPLAY_PROXY")
    return {name: proxy for name in names} | {"no_proxy": "", "NO_PROXY": ""}


def _unstartable(params: CommandParams) -> list[str]:
    """What would stop the program from starting at all: exec refuses NUL bytes and malformed
    variable names, and a program that is not on this host cannot run."""
    problems = []
    for n, arg in enumerate(params.command):
        if "\0" in arg:
            problems.append(f"params.command.{n}: contains a NUL byte, which no program can get")
    for key, value in params.env.items():
        if not key or "=" in key or "\0" in key:
            problems.append(f"params.env: {key!r} is not a valid variable name")
        if "\0" in value:
            problems.append(f"params.env.{key}: contains a NUL byte, which no program can get")
    if "\0" in params.cwd:
        problems.append("params.cwd: contains a NUL byte")
    size = sum(len(a.encode(errors="replace")) + 1 for a in params.command) + sum(
        len(k.encode(errors="replace")) + len(v.encode(errors="replace")) + 2
        for k, v in params.env.items()
    )
    if size > MAX_EXEC_BYTES:  # exec would refuse it (E2BIG): say so now, not after three tries
        problems.append(
            f"params.command: arguments and environment take {size} bytes "
            f"(at most {MAX_EXEC_BYTES}); pass large inputs in a file"
        )
    program = params.command[0]
    if not problems and shutil.which(program) is None:
        problems.append(f"params.command: program {program!r} not found on this host")
    return problems

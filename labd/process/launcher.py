"""Running a measured program so that its resource figures are its own.

Linux folds the memory a process held before exec into its peak resident set, so a program
forked straight from labd reports labd's memory as its own (150 MB of daemon made
`python3 -c pass` read 164 MB). labd therefore execs a small launcher (`launch.c`, built once
per host with the C compiler; `launch_fallback.py` where there is none) which forks the
program and reports what wait4 says about the program alone: peak RSS, user and system time,
wall time from fork to exit, and whether a time-out killed it.

The launcher also applies what must happen between fork and exec of the program: CPU
affinity, no address-space randomisation, and dropping to an unprivileged user (`RunAs`),
refusing to exec the program as root when asked to drop.

Nothing the program starts outlives it: the launcher is a child subreaper (PR_SET_CHILD_SUBREAPER),
so a descendant that detaches (setsid and a double fork) is reparented to the launcher, not to
init. When the program has exited and wait4 has given its figures, the launcher sends every
descendant still running SIGTERM, then SIGKILL after a second, reaps them, and reports how many
there were (`Usage.strays`). Their work is in none of the program's figures.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import IO

from labd.acceptor import SOFT_OPEN_FILES_AT_START
from labd.errors import CannotStart, InfrastructureError, TestFailure
from labd.model import RunAs

__all__ = ["Launch", "RunAs", "Usage", "launcher_command"]

SOURCE = Path(__file__).with_name("launch.c")
FALLBACK = Path(__file__).with_name("launch_fallback.py")
STOP_GRACE_S = 5.0  # after SIGTERM, how long the launcher may take to report
REPORT_GRACE_S = 30.0  # after the iteration's time-out, how long it may take to report
# A launcher ended by one of these failed itself (a bug, the host): the device is to blame.
CRASH_SIGNALS = frozenset(
    {signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE, signal.SIGILL, signal.SIGSYS}
)


@dataclass(frozen=True)
class Usage:
    """The program's own figures, from wait4 in the launcher."""

    exit_code: int  # as subprocess reports it: negative for a signal
    wall_s: float
    user_s: float
    system_s: float
    max_rss_kib: int
    timed_out: bool
    strays: int = 0  # descendants still running when the program exited, ended by the launcher

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


def _cache_dirs() -> list[Path]:
    """Where the built launcher is kept: labd's own setting, systemd's CacheDirectory=, the
    user's cache."""
    named = (os.environ.get(k, "") for k in ("LABD_CACHE_DIR", "CACHE_DIRECTORY"))
    dirs = [Path(v.split(":")[0]) for v in named if v]
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return [*dirs, Path(base) / "labd"]


def _private_dir(path: Path) -> bool:
    """Ours alone: a binary others could replace must never be exec'd (perhaps as root)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = path.stat()
    except OSError:
        return False
    return info.st_uid == os.geteuid() and not info.st_mode & 0o022


@cache
def launcher_command() -> tuple[tuple[str, ...], str]:
    """(the launcher's argv prefix, what it is): the C launcher, built once per host and
    source version, or the Python one with the reason the C one is not there."""
    source = SOURCE.read_bytes()
    name = f"labd-launch-{hashlib.sha256(source).hexdigest()[:16]}"
    compiler = shutil.which(os.environ.get("CC", "cc"))
    why = "no C compiler (cc) on this host"
    if compiler:
        for folder in [*_cache_dirs(), Path(tempfile.mkdtemp(prefix="labd-launch-"))]:
            if not _private_dir(folder):
                continue
            binary = folder / name
            if binary.is_file() and os.access(binary, os.X_OK):
                return (str(binary),), "c"
            built = _build(compiler, folder, binary)
            if built is None:
                return (str(binary),), "c"
            why = built
            break
    return (sys.executable, "-I", "-S", str(FALLBACK)), f"python ({why})"


def _build(compiler: str, folder: Path, binary: Path) -> str | None:
    """Compile into a temporary name, then rename: a half-written binary is never run."""
    scratch = folder / f".{binary.name}.{os.getpid()}"
    try:
        done = subprocess.run(
            [compiler, "-O2", "-o", str(scratch), str(SOURCE)],
            capture_output=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot build the C launcher: {e}"
    if done.returncode != 0:
        scratch.unlink(missing_ok=True)
        return f"cannot build the C launcher: {done.stderr.decode(errors='replace')[:200]}"
    scratch.replace(binary)
    return None


class Launch:
    """One run of a program through the launcher (blocking: call `run` from a thread)."""

    def __init__(
        self,
        argv: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        cpus: Collection[int] | None = None,
        disable_aslr: bool = False,
        run_as: RunAs | None = None,
        submitted_cwd: bool = False,
        timeout_s: float | None = None,
        stdout: IO[bytes] | int = subprocess.DEVNULL,
        stderr: IO[bytes] | int = subprocess.DEVNULL,
    ) -> None:
        prefix, self.kind = launcher_command()
        options: list[str] = []
        if cpus:
            options += ["--cpus", ",".join(str(c) for c in sorted(cpus))]
        if disable_aslr:
            options.append("--no-aslr")
        if run_as is not None:
            options += ["--user", run_as.argument()]
        if submitted_cwd:  # the submitter's: entered after the drop, as the program's account
            options += ["--cwd", str(cwd)]
        if SOFT_OPEN_FILES_AT_START != resource.RLIM_INFINITY:
            options += ["--nofile", str(SOFT_OPEN_FILES_AT_START)]
        if timeout_s is not None:
            options += ["--timeout-ms", str(max(1, round(timeout_s * 1000)))]
        self._prefix, self._options, self.argv = list(prefix), options, argv
        self._timeout_s, self._submitted_cwd = timeout_s, submitted_cwd
        self.cwd, self.env, self.stdout, self.stderr = cwd, dict(env), stdout, stderr
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._stopping = False

    def run(self) -> Usage:
        """Start and wait. TestFailure when the program could not be started as asked (not
        found, not allowed, refused as root); InfrastructureError when the launcher failed."""
        read_end, write_end = os.pipe()
        try:
            command = [*self._prefix, "--result-fd", str(write_end), *self._options, "--"]
            with self._lock:
                if self._stopping:
                    raise TestFailure("stopped before it started")
                try:
                    self._proc = subprocess.Popen(
                        [*command, *self.argv],
                        # labd's own directory for the job is entered by labd, as a grant: the
                        # program's account may not cross labd's private folders above it.
                        cwd="/" if self._submitted_cwd else self.cwd,
                        env=self.env,
                        stdin=subprocess.DEVNULL,
                        stdout=self.stdout,
                        stderr=self.stderr,
                        pass_fds=(write_end,),
                        start_new_session=True,  # a kill reaches the launcher's group
                    )
                except OSError as e:
                    if e.errno == errno.E2BIG:  # the job's arguments: not the device's fault
                        raise CannotStart(f"arguments or environment too long: {e}") from e
                    raise InfrastructureError(f"cannot start the launcher: {e}") from e
            os.close(write_end)
            write_end = -1
            line = self._report(read_end)
            if not line.startswith(("ok ", "error ")):
                self._end_leftovers()  # it died without ending what it started
            self._proc.wait()
        finally:
            for fd in (read_end, write_end):
                if fd >= 0:
                    os.close(fd)
        return self._parse(line)

    def _report(self, fd: int) -> str:
        """The launcher's one-line report, read until it closes the pipe. With a time-out, a
        launcher still silent well past it has been stopped (kill -STOP $PPID from the
        program), and the iteration fails rather than the job waiting for its own time-out:
        the launcher is resumed and told to stop, so it ends the program and its strays as
        usual, and killed if it does not."""
        assert self._proc is not None
        if self._timeout_s is None:
            return _read_to_end(fd, None) or ""
        line = _read_to_end(fd, time.monotonic() + self._timeout_s + REPORT_GRACE_S)
        if line is not None:
            return line
        for sig in (signal.SIGTERM, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, sig)
        if _read_to_end(fd, time.monotonic() + STOP_GRACE_S) is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._end_leftovers()
        self._proc.wait()
        raise TestFailure(
            f"the launcher gave no report {REPORT_GRACE_S:g} s after the iteration's time-out: "
            "it had been stopped (kill -STOP from the program?); the run was ended"
        )

    def _parse(self, line: str) -> Usage:
        kind, _, rest = line.partition(" ")
        if kind == "ok":
            status, wall, user, system, rss, timed_out, strays = (int(x) for x in rest.split())
            return Usage(
                exit_code=os.waitstatus_to_exitcode(status),
                wall_s=wall / 1e9,
                user_s=user / 1e6,
                system_s=system / 1e6,
                max_rss_kib=rss,
                timed_out=bool(timed_out),
                strays=strays,
            )
        if kind == "error":
            stage, _, detail = rest.partition(" ")
            message = detail.partition(" ")[2] or detail
            if stage == "cwd":
                account = "the job's account" if "--user" in self._options else "labd"
                raise TestFailure(
                    f"cannot enter the working directory {str(self.cwd)!r} as {account}: {message}"
                )
            what = {"exec": "cannot start", "user": "cannot run as the configured user"}
            raise TestFailure(f"{what.get(stage, stage)} {self.argv[0]!r}: {message}")
        if self._stopping:
            raise TestFailure("stopped")
        assert self._proc is not None
        status = self._proc.returncode
        if status < 0 and -status not in CRASH_SIGNALS:
            # Sent by someone else: the program can reach its parent (kill -9 $PPID), and the
            # kernel's OOM killer acts for its memory. The device is not at fault.
            raise TestFailure(
                f"the launcher was killed by {signal.Signals(-status).name}, not by labd: the "
                "program or a process it started killed it, or the kernel ended it for memory "
                "(see the kernel log)"
            )
        raise InfrastructureError(f"the launcher ended without a report (status {status})")

    def _end_leftovers(self) -> None:
        """Once the launcher is dead (not yet reaped, so its pid cannot be reused), end what
        is left in its session: the program and whatever it started that did not detach."""
        assert self._proc is not None
        with contextlib.suppress(ChildProcessError):  # already reaped by stop()
            os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOWAIT)
        end_session(self._proc.pid)

    def stop(self) -> None:
        """Kill the program and what it started; the launcher still reports (then is killed
        itself if it does not go within a few seconds)."""
        with self._lock:
            self._stopping = True
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


def _read_to_end(fd: int, deadline: float | None) -> str | None:
    """Everything written to fd until its writers close it, or None at `deadline`."""
    chunks: list[bytes] = []
    ready = select.poll()  # not select(): a busy daemon's descriptors pass 1024
    ready.register(fd, select.POLLIN)
    while True:
        wait = None if deadline is None else max(0, round((deadline - time.monotonic()) * 1000))
        if not ready.poll(wait):
            if wait == 0:
                return None
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks).decode(errors="replace").strip()
        chunks.append(chunk)


def end_session(session: int, rounds: int = 100) -> int:
    """SIGKILL every live process of `session` until none is left (a forking one may add
    more between rounds); how many there were."""
    ended: set[int] = set()
    for _ in range(rounds):
        found = _session_members(session)
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ended |= found
        time.sleep(0.01)
    return len(ended)


def _session_members(session: int) -> set[int]:
    """Live (not zombie) processes whose session is `session`, from /proc/PID/stat."""
    members = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue  # it ended meanwhile
        # After the command name, which may hold spaces and brackets: state ppid pgrp session
        state, _, _, sid = stat[stat.rindex(b")") + 2 :].split()[:4]
        if int(sid) == session and state not in (b"Z", b"X"):
            members.add(int(entry.name))
    return members

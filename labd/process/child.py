"""What a program's process does between fork and exec when labd starts it directly (browsers;
measured commands go through the launcher, `labd.process.launcher`): die with labd, run on
chosen CPUs, no address-space randomisation, never as root when a user to run as is given,
the open-files limit labd started with; and the environment every program labd starts gets."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
from collections.abc import Callable, Collection
from typing import Any

from labd.acceptor import SOFT_OPEN_FILES_AT_START
from labd.model import RunAs

INHERITED = ("LANG", "LC_ALL", "LC_CTYPE", "TZ")  # the locale and time zone a program expects


def program_env(path: str, home: str, **more: str) -> dict[str, str]:
    """The environment of a program labd starts: a search path, a home, a temporary directory,
    the locale, and `more`; never labd's own variables (LABD_* may hold a database's or a
    broker's password, and a job's program reads its environment)."""
    base = {"PATH": path, "HOME": home, "TMPDIR": "/tmp"}
    return base | {k: os.environ[k] for k in INHERITED if k in os.environ} | more

PR_SET_PDEATHSIG = 1  # prctl(2) option
ADDR_NO_RANDOMIZE = 0x0040000  # personality(2) flag: no address-space randomisation


def child_setup(
    cpus: Collection[int] | None, disable_aslr: bool, run_as: RunAs | None = None
) -> Callable[[], None]:
    """A preexec_fn doing only plain system calls: no Python locks between fork and exec.
    With `run_as`, pass `user_arguments(run_as)` to Popen as well: Popen drops the user
    before this runs, and this refuses to go on as root."""
    libc = ctypes.CDLL(None, use_errno=True)
    personality = libc.personality if disable_aslr else None
    chosen = set(cpus) if cpus else None
    must_drop = run_as is not None
    files = SOFT_OPEN_FILES_AT_START  # labd raised its own for its servers

    def setup() -> None:
        if must_drop and (os.getuid() == 0 or os.geteuid() == 0):
            raise PermissionError("refusing to run the program as root")
        # Die with the thread that started us: if labd is killed, its measured programs
        # must not run on while a restarted labd runs the same job again. (Set after the
        # user drop: a change of credentials clears it.)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if chosen is not None:
            os.sched_setaffinity(0, chosen)
        if personality is not None:
            current = personality(0xFFFFFFFF)
            if personality(current | ADDR_NO_RANDOMIZE) == -1:
                raise OSError(ctypes.get_errno(), "personality(ADDR_NO_RANDOMIZE) failed")
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if files != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or files < soft):
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, hard))

    return setup


def user_arguments(run_as: RunAs | None) -> dict[str, Any]:
    """Popen's own user switch (done in C before preexec_fn), or nothing."""
    if run_as is None:
        return {}
    return {"user": run_as.uid, "group": run_as.gid, "extra_groups": list(run_as.groups)}


def split_cpus() -> tuple[set[int], set[int]]:
    """(the measured program's CPUs, everyone else's): the upper half of the CPUs labd may use
    for the program alone, so labd's capture and analysis do not compete with it. With one CPU
    both get it."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return set(cpus), set(cpus)
    half = len(cpus) // 2
    return set(cpus[half:]), set(cpus[:half])

"""Run a program under labd.service's system-call filter, without systemd.

Reads the unit's SystemCallFilter= lines, expands their groups as this machine's systemd
defines them (`systemd-analyze syscall-filter`), installs the same allow list with libseccomp
(every other call fails with EPERM, as SystemCallErrorNumber=EPERM says) and executes the
program, whose children inherit the filter. It lets a test show that labd, its jobs, Xvfb and
browsers run under the unit's filter on a machine where systemd is not PID 1.

Run with Debian's python3 and python3-seccomp:
    /usr/bin/python3 systemd/syscall_filter.py systemd/labd.service PROGRAM [ARGS...]
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import sys
from pathlib import Path


def groups() -> dict[str, list[str]]:
    """Each @group of this machine's systemd, as the names (calls or @groups) it lists."""
    listing = subprocess.run(
        ["systemd-analyze", "syscall-filter", "--no-pager"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, list[str]] = {}
    current = ""
    for line in listing.splitlines():
        if line.startswith("@"):
            current = line.strip()
            found[current] = []
        elif current and re.fullmatch(r"\s+[@\w-]+", line):
            found[current].append(line.strip())
    return found


def expand(names: list[str], known: dict[str, list[str]]) -> set[str]:
    calls: set[str] = set()
    for name in names:
        calls |= expand(known[name], known) if name.startswith("@") else {name}
    return calls


def allowed_calls(unit: Path) -> set[str]:
    """The calls the unit's SystemCallFilter= lines allow (an allow list, then denials)."""
    known = groups()
    allowed: set[str] = set()
    for line in unit.read_text().splitlines():
        if not line.startswith("SystemCallFilter="):
            continue
        value = line.split("=", 1)[1].split()
        if value and value[0].startswith("~"):
            allowed -= expand([value[0][1:], *value[1:]], known)
        else:
            allowed |= expand(value, known)
    return allowed


def main() -> None:
    import seccomp  # Debian's python3-seccomp

    unit, argv = Path(sys.argv[1]), sys.argv[2:]
    rules = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
    for call in sorted(allowed_calls(unit)):
        with contextlib.suppress(RuntimeError, ValueError):  # not a call of this architecture
            rules.add_rule(seccomp.ALLOW, call)
    rules.load()  # NoNewPrivileges=yes is implied for an unprivileged loader
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()

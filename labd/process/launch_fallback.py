"""The launcher in Python, for hosts without a C compiler: same arguments, same result line.

Run as `python -I -S launch_fallback.py ...` and importing nothing of labd, it stays near 9 MB:
programs smaller than that read as the launcher's size (a documented limit); the C launcher
(`launch.c`, about 1.5 MB) is used whenever it can be built.

No Python runs in the program's process: the launcher applies CPU affinity, no-ASLR and the
drop to another user to itself (all three are inherited), then `posix_spawn`s the program, so
the program's CPU time holds none of the launcher's work between fork and exec.

Like the C launcher it is a child subreaper and ends every descendant still running once the
program has exited (SIGTERM, a grace, SIGKILL), reporting how many there were.
"""

import ctypes
import os
import resource  # before a drop to another user: it may not be importable after
import signal
import sys
import time

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
ADDR_NO_RANDOMIZE = 0x0040000
STRAY_GRACE_S = 1.0  # after SIGTERM, before SIGKILL


def descendants(root: int) -> list[int]:
    """Every live (not zombie) process below root, from one pass over /proc."""
    children: dict[int, list[tuple[int, bool]]] = {}
    for name in os.listdir("/proc"):  # noqa: PTH208  pathlib would add to our own memory
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:  # noqa: PTH123  as above
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        state, ppid = stat[stat.rfind(b")") + 2 :].split(b" ", 2)[:2]
        children.setdefault(int(ppid), []).append((int(name), state in (b"Z", b"X")))
    found, queue = [], [root]
    while queue:
        for pid, zombie in children.get(queue.pop(), []):
            queue.append(pid)
            if not zombie:
                found.append(pid)
    return found


def reap_zombies() -> bool:
    """Reaps what has exited; whether any child is left. With none, nothing is below us
    (every descendant's chain of parents leads here), and /proc need not be read."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        return False
    return True


def end_strays() -> int:
    """SIGTERM, a grace, then SIGKILL to everything below us until nothing is left; how many
    distinct processes were still running."""
    seen: set[int] = set()
    start = time.monotonic()
    while True:
        live = descendants(os.getpid()) if reap_zombies() else []
        if not live:
            return len(seen)
        sig = signal.SIGTERM if time.monotonic() - start < STRAY_GRACE_S else signal.SIGKILL
        for pid in live:
            if pid in seen and sig == signal.SIGTERM:
                continue  # asked once; it has the grace
            seen.add(pid)
            try:  # not contextlib.suppress: it would add to the launcher's own memory
                os.kill(pid, sig)
            except ProcessLookupError:
                continue  # it ended meanwhile: what the signal was for
        time.sleep(0.01)


def main(argv: list[str]) -> int:
    opts: dict[str, str] = {}
    i = 1
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--no-aslr":
            opts["no-aslr"] = "1"
            i += 1
        else:
            opts[argv[i].removeprefix("--")] = argv[i + 1]
            i += 2
    program = argv[i + 1 :]
    out = int(opts["result-fd"])
    # Not the program's: labd reads the pipe to its end, which a stray holding it would delay
    # for as long as the stray lives (the C launcher closes it in the child).
    os.set_inheritable(out, False)
    report = os.fdopen(out, "w")
    libc = ctypes.CDLL(None, use_errno=True)
    user = opts.get("user")
    if user is not None and int(user.split(":")[0]) == 0:
        report.write("error user 1 refusing to run the program as root\n")
        return 126
    # SIGTERM, not SIGKILL, when labd dies: the handler below kills the program first.
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    # Orphans below us are reparented to us, not to init: we can find and end them.
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    flags = {"alarm": False, "term": False}
    child = {"pid": 0}

    def kill_program() -> None:
        for target in (-child["pid"], child["pid"]):
            try:  # not contextlib.suppress: it would add to the launcher's own memory
                os.kill(target, signal.SIGKILL)
            except ProcessLookupError:
                continue  # the group or the program has ended: what the signal was for

    def on_signal(signum: int, _frame: object) -> None:
        # Python retries wait4 after a handler (PEP 475), so the handler does the killing.
        flags["alarm" if signum == signal.SIGALRM else "term"] = True
        if child["pid"]:
            kill_program()

    signal.signal(signal.SIGALRM, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    stage = "setup"
    try:
        if "cpus" in opts:
            stage = "cpus"
            os.sched_setaffinity(0, {int(c) for c in opts["cpus"].split(",")})
        if "no-aslr" in opts:
            stage = "aslr"
            current = libc.personality(0xFFFFFFFF)
            if libc.personality(current | ADDR_NO_RANDOMIZE) == -1:
                raise OSError(ctypes.get_errno(), "personality failed")
        if user is not None:
            stage = "user"
            uid, gid, *rest = user.split(":")
            os.setgroups([int(g) for g in rest[0].split(",")] if rest and rest[0] else [])
            os.setresgid(int(gid), int(gid), int(gid))
            os.setresuid(int(uid), int(uid), int(uid))
            if os.getuid() == 0 or os.geteuid() == 0:
                raise PermissionError(1, "still root after the drop")
            try:
                os.setuid(0)
            except PermissionError:
                pass  # the drop holds: the refusal is what this checks for
            else:
                raise PermissionError(1, "could become root again")
            libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if "cwd" in opts:  # after the drop: the program's account must reach it, not labd's
            stage = "cwd"
            os.chdir(opts["cwd"])
        if "nofile" in opts:  # the soft limit labd started with, not the one it raised
            stage = "nofile"
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if int(opts["nofile"]) < soft:
                resource.setrlimit(resource.RLIMIT_NOFILE, (int(opts["nofile"]), hard))
        stage = "exec"
        start = time.monotonic_ns()
        pid = os.posix_spawnp(
            program[0],
            program,
            os.environ,
            setpgroup=0,
            setsigdef=(signal.SIGALRM, signal.SIGTERM),
        )
    except OSError as e:
        report.write(f"error {stage} {e.errno or 0} {e.strerror or e}\n")
        return 126
    child["pid"] = pid
    if flags["alarm"] or flags["term"]:
        kill_program()
    timeout_ms = int(opts.get("timeout-ms", "0"))
    if timeout_ms > 0:
        signal.setitimer(signal.ITIMER_REAL, timeout_ms / 1000, 0.05)
    _, status, usage = os.wait4(pid, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    wall = time.monotonic_ns() - start
    strays = end_strays()  # after wait4: what they did is in none of the program's figures
    user_us, system_us = round(usage.ru_utime * 1e6), round(usage.ru_stime * 1e6)
    timed_out = int(flags["alarm"])
    figures = f"{status} {wall} {user_us} {system_us} {usage.ru_maxrss} {timed_out} {strays}"
    report.write(f"ok {figures}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

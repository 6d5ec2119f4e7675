"""The admin's policy of what jobs may run on a host: which programs, which environment, and
as which user. Scenarios that start programs check their parameters against it at submit
time and start programs through it at run time."""

from __future__ import annotations

import fnmatch
import os
import pwd
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

SHELLS = frozenset(
    {"sh", "bash", "dash", "zsh", "ksh", "mksh", "csh", "tcsh", "fish", "ash", "busybox"}
)

# Variables that change which code a program loads or how a shell parses: never matched by a
# pattern, only by an exact entry in policy.env_keys.
LOADER_KEYS = ("LD_*", "*PATH", "PYTHON*", "PERL5*", "RUBY*", "NODE_OPTIONS", "BASH_ENV")
LOADER_KEYS_EXACT = frozenset({"ENV", "IFS", "GCONV_PATH", "HOSTALIASES", "MALLOC_CHECK_"})


class ProgramNotFound(ValueError):
    """The program is not on the policy's path (or not a file)."""


@dataclass(frozen=True)
class RunAs:
    """The unprivileged account measured programs run as when labd runs as root."""

    name: str
    uid: int
    gid: int
    home: str
    groups: tuple[int, ...] = ()  # supplementary groups (e.g. video, plugdev)

    def __post_init__(self) -> None:
        if self.uid == 0:  # whoever builds one: a program is never dropped "to" root
            raise ValueError(f"run_as {self.name!r} is root; measured programs never run as root")

    @classmethod
    def user(cls, name: str) -> RunAs:
        """An account by name or uid, with its supplementary groups; ValueError if none."""
        return _account(name)

    def argument(self) -> str:
        """uid:gid:groups, as labd's launcher takes it."""
        return f"{self.uid}:{self.gid}:{','.join(str(g) for g in self.groups)}"

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid}, gid {self.gid})"

    def give(self, path: Path) -> None:
        """Hand a directory labd made for the program over to this account."""
        os.chown(path, self.uid, self.gid)


@dataclass(frozen=True)
class Policy:
    """Resolved once when labd starts: `programs` maps each allowed program's real path to
    the name the configuration gave it."""

    programs: Mapping[str, str] = field(default_factory=dict)
    path: str = "/usr/local/bin:/usr/bin:/bin"
    env_keys: tuple[str, ...] = ()
    run_as: RunAs | None = None  # the job's account (the first of `accounts` until one is given)
    missing: tuple[str, ...] = ()  # listed programs not found on this host
    accounts: tuple[RunAs, ...] = ()  # jobs side by side each take one no other running job has

    @classmethod
    def resolve(
        cls,
        programs: list[str],
        path: str,
        env_keys: list[str],
        run_as: str | Sequence[str],
        euid: int,
    ) -> Policy:
        """The policy of this host; raises ValueError for a run_as account that is unusable."""
        allowed: dict[str, str] = {}
        missing = []
        for entry in programs:
            found = shutil.which(entry, path=path) if "/" not in entry else entry
            if found and Path(found).is_file() and os.access(found, os.X_OK):
                allowed[os.path.realpath(found)] = entry
            else:
                missing.append(entry)
        names = [run_as] if isinstance(run_as, str) else list(run_as)
        accounts = tuple(_account(name) for name in names) if euid == 0 else ()
        if len({a.uid for a in accounts}) < len(accounts):
            raise ValueError("policy.run_as: two entries are the same account")
        first = accounts[0] if accounts else None
        return cls(allowed, path, tuple(env_keys), first, tuple(missing), accounts)

    def for_job(self, account: RunAs) -> Policy:
        """This policy with the job's own account."""
        return replace(self, run_as=account)

    def run_as_record(self) -> str:
        """Who measured programs run as, for a result's fingerprint: the same for every job of
        this host, whichever of several accounts a job was given."""
        if self.run_as is None:
            return "labd's own user"
        if len(self.accounts) > 1:
            return "one of " + ", ".join(a.describe() for a in self.accounts)
        return self.run_as.describe()

    def program(self, argv0: str) -> str:
        """The absolute path to start for argv[0]; ValueError naming the rule when the
        policy does not allow it (ProgramNotFound when it is nowhere to be found)."""
        if "/" in argv0 and not Path(argv0).is_absolute():
            # Relative to what? The check here and the start in the job's directory would
            # each answer for another directory: one could approve what the other runs.
            raise ValueError(
                f"program {argv0!r}: a path must be absolute (or give a name, looked up on "
                "the policy's path)"
            )
        found = shutil.which(argv0, path=self.path) if "/" not in argv0 else argv0
        if not found or not Path(found).is_file():
            where = "" if "/" in argv0 else f" on the policy's path ({self.path})"
            raise ProgramNotFound(f"program {argv0!r} not found{where}")
        real = os.path.realpath(found)
        if real not in self.programs:
            allowed = ", ".join(sorted(set(self.programs.values()))) or "none"
            shell = " (a shell runs only when listed by name)" if _is_shell(real) else ""
            raise ValueError(
                f"program {argv0!r} is not allowed by policy.programs (allowed: {allowed}){shell}"
            )
        if _is_shell(real) and Path(self.programs[real]).name not in SHELLS:
            raise ValueError(f"program {argv0!r} is a shell; list it by name in policy.programs")
        return found

    def env_problems(self, env: Mapping[str, str]) -> list[str]:
        """One line per variable the policy does not let a job set."""
        return [
            f"env.{key}: not allowed by policy.env_keys"
            + (" (loader and search-path variables need an exact entry)" if _loader(key) else "")
            for key in env
            if not self.env_allowed(key)
        ]

    def env_allowed(self, key: str) -> bool:
        if key in self.env_keys:
            return True
        if _loader(key):
            return False
        return any(fnmatch.fnmatchcase(key, pattern) for pattern in self.env_keys)


def _is_shell(path: str) -> bool:
    return Path(path).name in SHELLS


def _loader(key: str) -> bool:
    return key in LOADER_KEYS_EXACT or any(fnmatch.fnmatchcase(key, p) for p in LOADER_KEYS)


def _account(name: str) -> RunAs:
    try:
        entry = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    except KeyError:
        raise ValueError(f"policy.run_as: no such user {name!r} on this host") from None
    if entry.pw_uid == 0:
        raise ValueError(f"policy.run_as: {name!r} is root; measured programs never run as root")
    groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
    return RunAs(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, groups)

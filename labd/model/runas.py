"""The unprivileged user measured programs and browsers run as when labd runs as root."""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from labd.errors import UsageError


@dataclass(frozen=True)
class RunAs:
    """An unprivileged user to run measured programs and browsers as (never root)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    name: str = ""

    def __post_init__(self) -> None:
        if self.uid == 0:
            raise UsageError(f"run_as {self.name or 0!r}: refusing to run programs as root")

    @classmethod
    def user(cls, name: str) -> RunAs:
        """A user by name or numeric uid, with its primary group and supplementary groups."""
        try:
            entry = pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
        except (KeyError, ValueError):
            raise UsageError(f"run_as {name!r}: no such user on this host") from None
        groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
        return cls(entry.pw_uid, entry.pw_gid, tuple(sorted(set(groups))), entry.pw_name)

    def argument(self) -> str:
        return f"{self.uid}:{self.gid}:{','.join(str(g) for g in self.groups)}"

    def describe(self) -> str:
        group = _group_name(self.gid)
        return f"{self.name or self.uid} (uid {self.uid}, gid {self.gid} {group})".strip()

    def give(self, path: Path) -> None:
        """Hand a directory labd made for the program over to this user."""
        os.chown(path, self.uid, self.gid)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return ""

"""Principals and roles: who the lab admits and what each may do.

A principal is a CI system, a person or a dashboard, configured in `[auth.principals.<name>]`
with its role and credentials. The account running labd is always the admin `local`: its
credentials live in the state directory (see `credentials`).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from labd.config import LOCAL_PRINCIPAL, AuthSettings, PrincipalSettings


class Role(StrEnum):
    VIEWER = "viewer"
    SUBMITTER = "submitter"
    ADMIN = "admin"


class Action(StrEnum):
    READ = "read"  # jobs, results, devices, history
    SUBMIT = "submit"
    CANCEL = "cancel"  # its own jobs; an admin's: every job
    ADMINISTER = "administer"  # devices (drain, enable, maintenance)


# A key id, wherever one is made or read: `labd auth add`, the configuration's secret_keys, a
# signed message's auth.key_id (labd.config.access holds the same rule: it may not import this).
ALLOWED: Mapping[Role, frozenset[Action]] = {
    Role.VIEWER: frozenset({Action.READ}),
    Role.SUBMITTER: frozenset({Action.READ, Action.SUBMIT, Action.CANCEL}),
    Role.ADMIN: frozenset(Action),
}


@dataclass(frozen=True)
class Principal:
    """One admitted party, as the daemon checks it."""

    name: str
    role: Role
    keys: Mapping[str, bytes] = field(default_factory=dict, repr=False)  # HMAC keys by id
    token_sha256: frozenset[str] = field(default_factory=frozenset, repr=False)
    unix_users: frozenset[str] = frozenset()
    scenarios: frozenset[str] = frozenset()  # empty: every scenario the policy allows
    submits_per_minute: int = 120
    max_active_jobs: int = 1000
    broker_password_hash: str = field(default="", repr=False)

    def may(self, action: Action) -> bool:
        return action in ALLOWED[self.role]

    def may_cancel(self, owner: str) -> bool:
        """Whether it may cancel a job submitted by `owner`."""
        return self.role is Role.ADMIN or (self.may(Action.CANCEL) and owner == self.name)

    def may_run(self, scenario: str) -> bool:
        return not self.scenarios or scenario in self.scenarios


def decode_key(text: str) -> bytes:
    """A key as written in configuration and credentials files (base64url, padding optional)."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def from_settings(name: str, s: PrincipalSettings) -> Principal:
    return Principal(
        name=name,
        role=Role(s.role),
        keys={key_id: decode_key(secret) for key_id, secret in s.secret_keys.items()},
        token_sha256=frozenset(s.token_sha256),
        unix_users=frozenset(s.unix_users),
        scenarios=frozenset(s.scenarios),
        submits_per_minute=s.submits_per_minute,
        max_active_jobs=s.max_active_jobs,
        broker_password_hash=s.broker_password_hash,
    )


class Principals:
    """Every principal of the lab, found by name, by bearer token or by local account."""

    def __init__(self, principals: Iterable[Principal]) -> None:
        self._by_name = {p.name: p for p in principals}
        self._by_token = {d: p for p in self._by_name.values() for d in p.token_sha256}
        self._by_user = {u: p for p in self._by_name.values() for u in p.unix_users}

    @classmethod
    def from_settings(cls, settings: AuthSettings, local: Principal | None) -> Principals:
        configured = [from_settings(n, s) for n, s in settings.principals.items()]
        return cls([*configured, *([local] if local else [])])

    def get(self, name: str) -> Principal | None:
        return self._by_name.get(name)

    def by_token(self, token: str) -> Principal | None:
        # Compared by digest: the table holds no tokens, and a dict lookup on a SHA-256
        # reveals nothing usable about the token through its timing.
        return self._by_token.get(token_digest(token))

    def by_unix_user(self, user: str) -> Principal | None:
        return self._by_user.get(user)

    @property
    def local(self) -> Principal | None:
        return self._by_name.get(LOCAL_PRINCIPAL)

    def __iter__(self) -> Iterator[Principal]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

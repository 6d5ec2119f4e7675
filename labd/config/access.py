"""Settings of who may use the lab and what a job may run: principals, authentication, the
job policy."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, model_validator

from labd.config.section import Section
from labd.errors import ConfigError
from labd.model import Policy, id_problem, key_id_problem

LOCAL_PRINCIPAL = "local"


class PrincipalSettings(Section):
    """One principal the lab admits: a CI system, a person, a dashboard."""

    role: Literal["viewer", "submitter", "admin"] = Field(
        description=(
            "viewer: read results and state; submitter: also submit jobs and cancel its own; "
            "admin: also every job and the devices."
        )
    )
    secret_keys: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "HMAC-SHA256 keys that sign its MQTT messages, by key id (base64url, 32 bytes; "
            "`labd auth add` makes one). Several while a key is rotated."
        ),
    )
    token_sha256: list[str] = Field(
        default_factory=list,
        description="SHA-256 (hex) of the bearer tokens it may use on the HTTP API.",
    )
    broker_password_hash: str = Field(
        "",
        description=(
            "Its MQTT broker password, hashed as Mosquitto's passwd file does ($7$ PBKDF2); "
            "`labd auth mosquitto` writes it to the broker's files."
        ),
    )
    unix_users: list[str] = Field(
        default_factory=list,
        description="Local accounts that act as this principal on the API's Unix socket.",
    )
    scenarios: list[str] = Field(
        default_factory=list,
        description="Scenarios it may submit; empty: every scenario the policy allows.",
    )
    submits_per_minute: int = Field(
        120, ge=1, le=100_000, description="Submissions accepted per minute."
    )
    max_active_jobs: int = Field(
        1000, ge=1, le=1_000_000, description="Its jobs queued or running at once."
    )

    @model_validator(mode="after")
    def _keys_are_keys(self) -> PrincipalSettings:
        for key_id, secret in self.secret_keys.items():
            if problem := key_id_problem(key_id):
                raise ValueError(f"secret_keys: {problem}")
            if len(secret) < 32:
                raise ValueError(f"secret_keys.{key_id}: shorter than 32 characters")
        for digest in self.token_sha256:
            if not re.fullmatch(r"[0-9a-f]{64}", digest):
                raise ValueError("token_sha256: each entry is 64 lowercase hex digits")
        return self


class AuthSettings(Section):
    """Who may use the lab: principals, their roles and credentials."""

    principals: dict[str, PrincipalSettings] = Field(
        default_factory=dict,
        description=(
            "Principals by name ([auth.principals.<name>] tables; `labd auth add NAME --role "
            "R` prints one). The local account running labd is always admin (`local`)."
        ),
    )
    max_age_s: float = Field(
        900,
        ge=10,
        le=7 * 86400,
        description=(
            "Signed MQTT messages older than this are refused as expired (requests a broker "
            "kept while labd was away are handled if they are younger)."
        ),
    )
    clock_skew_s: float = Field(
        60, ge=0, le=3600, description="How far in the future a message's time may be."
    )
    local_submits_per_minute: int = Field(
        600,
        ge=1,
        le=1_000_000,
        description="The local admin's submissions per minute (its scripts submit in batches).",
    )
    local_credentials: bool = Field(
        True,
        description=(
            "Create the local admin's credentials in the state directory on first start "
            "(readable by labd's user only), for the `labd` command on this machine."
        ),
    )

    @model_validator(mode="after")
    def _names_are_ids(self) -> AuthSettings:
        for name in self.principals:
            if problem := id_problem(name, "principal name"):
                raise ValueError(problem)
            if name == LOCAL_PRINCIPAL:
                raise ValueError(f"principal name {name!r} is reserved for the local admin")
        return self


class PolicySettings(Section):
    """What jobs may run on this host: the admin's policy."""

    programs: list[str] = Field(
        default_factory=lambda: ["python3"],
        description=(
            "Programs the command scenario may run: names resolved against `path` when labd "
            "starts, or absolute paths. A shell (sh, bash ...) runs only when listed by name. "
            "An interpreter listed here runs any code a job passes it: list what the lab needs."
        ),
    )
    path: str = Field(
        "/usr/local/bin:/usr/bin:/bin",
        description="Where programs are looked up (the submitter's PATH is never used).",
    )
    env_keys: list[str] = Field(
        default_factory=list,
        description=(
            "Environment variables a job may set (fnmatch patterns, e.g. MOZ_*). Loader and "
            "search-path variables (LD_*, PATH, PYTHONPATH ...) need an exact entry."
        ),
    )
    run_as: str | list[str] = Field(
        "nobody",
        description=(
            "When labd runs as root: the unprivileged user measured programs and browsers "
            "run as. Never root. A list gives jobs running side by side (slots, several "
            "displays) each an account no other running job has, so that none can read "
            "another's environment or signal its programs."
        ),
    )

    @model_validator(mode="after")
    def _not_root(self) -> PolicySettings:
        names = [self.run_as] if isinstance(self.run_as, str) else self.run_as
        if not names:
            raise ValueError("run_as: name at least one account")
        if any(name in ("root", "0") for name in names):
            raise ValueError("run_as: measured programs never run as root")
        if len(set(names)) < len(names):
            raise ValueError("run_as: an account is named twice")
        return self

    def host_policy(self, source: str) -> Policy:
        """The policy on this host, its programs resolved now; ConfigError naming `source`
        when this host cannot apply it (a run_as account it does not have). `labd run` and
        `labd config check` both call this, so check refuses what run would."""
        try:
            return Policy.resolve(
                self.programs, self.path, self.env_keys, self.run_as, os.geteuid()
            )
        except ValueError as e:
            raise ConfigError([f"{source}: {e}"]) from e

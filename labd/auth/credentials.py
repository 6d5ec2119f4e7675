"""A principal's own credentials, as its clients (the `labd` command, a CI script) hold them.

A credentials file is TOML, readable by its owner only:

    principal = "ci-main"
    key_id = "k1"
    secret_key = "<base64url, 32 bytes>"   # signs MQTT messages
    token = "<random>"                     # bearer token for the HTTP API
    broker_username = "ci-main"
    broker_password = "<random>"

The `labd` command looks for it in $LABD_CREDENTIALS, then ~/.config/labd/credentials.toml,
then the local daemon's state directory (`credentials/local.toml`, which labd writes on its
first start for the account it runs as: the `local` admin).
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path

from labd.auth.passwords import hash_password
from labd.auth.principals import Principal, Role, decode_key, token_digest
from labd.config import LOCAL_PRINCIPAL
from labd.errors import UsageError

LOCAL_FILE = Path("credentials") / "local.toml"
USER_FILE = Path("~/.config/labd/credentials.toml")


@dataclass(frozen=True)
class Credentials:
    principal: str
    key_id: str
    secret_key: str
    token: str
    broker_username: str
    broker_password: str
    path: Path | None = None

    @property
    def key(self) -> bytes:
        return decode_key(self.secret_key)

    def to_toml(self) -> str:
        fields = ("principal", "key_id", "secret_key", "token")
        lines = [
            f"# labd credentials of principal {self.principal!r}: keep this file secret.",
            *(f'{name} = "{getattr(self, name)}"' for name in fields),
            f'broker_username = "{self.broker_username}"',
            f'broker_password = "{self.broker_password}"',
        ]
        return "\n".join(lines) + "\n"

    def as_local_principal(self, submits_per_minute: int = 600) -> Principal:
        return Principal(
            name=LOCAL_PRINCIPAL,
            role=Role.ADMIN,
            keys={self.key_id: self.key},
            token_sha256=frozenset({token_digest(self.token)}),
            submits_per_minute=submits_per_minute,
            max_active_jobs=1_000_000,
        )


def new_credentials(principal: str, key_id: str = "k1") -> Credentials:
    """Fresh random credentials for `principal`."""
    return Credentials(
        principal=principal,
        key_id=key_id,
        secret_key=base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode(),
        token=secrets.token_urlsafe(32),
        broker_username=principal,
        broker_password=secrets.token_urlsafe(24),
    )


def broker_hash(credentials: Credentials) -> str:
    return hash_password(credentials.broker_password)


def read_credentials(path: Path) -> Credentials:
    """The credentials in `path`; UsageError naming the file and what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: no such credentials file") from None
    except PermissionError:
        raise UsageError(f"{path}: not readable by this user") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: cannot read credentials: {e}") from e
    fields = ("principal", "key_id", "secret_key", "token", "broker_username", "broker_password")
    missing = [f for f in fields if not isinstance(data.get(f), str)]
    if missing:
        raise UsageError(f"{path}: missing or not a string: {', '.join(missing)}")
    return Credentials(**{f: data[f] for f in fields}, path=path)


def ensure_local_credentials(state_dir: Path) -> Credentials:
    """The local admin's credentials in the state directory, created on first use.

    The daemon and the `labd` command may both get here first on a new machine: the file is
    created whole under a temporary name and linked into place, so whoever loses the race
    reads the winner's file.
    """
    path = state_dir / LOCAL_FILE
    if path.exists():
        return read_credentials(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    fresh = new_credentials(LOCAL_PRINCIPAL, key_id="local-1")
    temp = path.with_name(f".local-{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(fresh.to_toml())
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)  # atomic, and never replaces a file another process made
    finally:
        temp.unlink(missing_ok=True)
    return read_credentials(path)


def find_credentials(state_dir: Path) -> Credentials | None:
    """The credentials the `labd` command uses, or None when it has none (see module doc)."""
    if explicit := os.environ.get("LABD_CREDENTIALS"):
        return read_credentials(Path(explicit).expanduser())
    user_file = USER_FILE.expanduser()
    if user_file.is_file():
        return read_credentials(user_file)
    local = state_dir / LOCAL_FILE
    with contextlib.suppress(OSError):
        if local.is_file() and os.access(local, os.R_OK):
            return read_credentials(local)
    return None

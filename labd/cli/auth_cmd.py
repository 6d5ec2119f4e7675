"""`labd auth`: make a principal's credentials, rotate them, write Mosquitto's files, whoami."""

from __future__ import annotations

import argparse
import json
import os
import pwd
from pathlib import Path

from labd.auth import (
    LOCAL_FILE,
    Credentials,
    Principals,
    find_credentials,
    from_settings,
    hash_password,
    key_id_problem,
    mosquitto_acl,
    new_credentials,
    read_credentials,
    token_digest,
)
from labd.config import LOCAL_PRINCIPAL, load_config
from labd.errors import UsageError
from labd.model import id_problem
from labd.mqtt import broker_credentials

BROKER_USER = "mosquitto"  # the account Debian's and upstream's packages run the broker as


def _write_private(path: Path, text: str, force: bool) -> None:
    """Write a file only its owner can read; never over an existing one without --force."""
    if path.exists() and not force:
        raise UsageError(f"{path} exists; pass --force to replace it")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        # A device or a link: its mode is not this file's to set (/dev/null made 0600).
        raise UsageError(f"{path} is not a regular file; give a file's path")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(text)


def principal_snippet(creds: Credentials, role: str) -> str:
    """The [auth.principals.<name>] table that admits these credentials."""
    return (
        f"[auth.principals.{creds.principal}]\n"
        f'role = "{role}"\n'
        f'secret_keys = {{ "{creds.key_id}" = "{creds.secret_key}" }}\n'
        f'token_sha256 = ["{token_digest(creds.token)}"]\n'
        f'broker_password_hash = "{hash_password(creds.broker_password)}"\n'
    )


def add(args: argparse.Namespace) -> int:
    if problem := id_problem(args.name, "principal name"):
        raise UsageError(problem)
    if args.name == LOCAL_PRINCIPAL:
        raise UsageError(f"{LOCAL_PRINCIPAL!r} is the local admin's name; choose another")
    if problem := key_id_problem(args.key_id):  # `labd run` would refuse the block printed
        raise UsageError(f"--key-id: {problem}")
    creds = new_credentials(args.name, args.key_id)
    out = Path(args.out or f"{args.name}.credentials.toml")
    _write_private(out, creds.to_toml(), args.force)
    print("# Add to labd.toml on every host of the lab (then restart labd):\n")
    print(principal_snippet(creds, args.role))
    print(f"# Credentials for {args.name} written to {out} (mode 0600): give it to them only.")
    return 0


def rotate(args: argparse.Namespace) -> int:
    settings = load_config(args.config).settings
    principal = settings.auth.principals.get(args.name)
    if principal is None:
        raise UsageError(f"no principal {args.name!r} in the configuration")
    if problem := key_id_problem(args.key_id):
        raise UsageError(f"--key-id: {problem}")
    if args.key_id in principal.secret_keys:
        raise UsageError(f"principal {args.name!r} already has a key {args.key_id!r}")
    creds = new_credentials(args.name, args.key_id)
    out = Path(args.out or f"{args.name}.credentials.toml")
    _write_private(out, creds.to_toml(), args.force)
    keys = {**principal.secret_keys, creds.key_id: creds.secret_key}
    tokens = [*principal.token_sha256, token_digest(creds.token)]
    print("# 1. Replace these keys of the principal on every host, restart labd:")
    print(f"[auth.principals.{args.name}]")
    print("secret_keys = { " + ", ".join(f'"{k}" = "{v}"' for k, v in keys.items()) + " }")
    print(f"token_sha256 = {json.dumps(tokens)}")
    print(f'broker_password_hash = "{hash_password(creds.broker_password)}"')
    print(f"# 2. Hand over {out}; then regenerate the broker's files (labd auth mosquitto).")
    print("# 3. Once its clients use the new file, remove the old key and token above.")
    return 0


def mosquitto(args: argparse.Namespace) -> int:
    loaded = load_config(args.config)
    settings = loaded.settings
    principals = [from_settings(n, s) for n, s in settings.auth.principals.items()]
    prefix = settings.mqtt.prefix or f"labd/v1/{settings.daemon.lab}"
    user, password = broker_credentials(settings.mqtt)
    daemon_user = args.daemon_user or user
    if not daemon_user or not password:
        raise UsageError(
            "labd's own broker account is not configured: set mqtt.username and mqtt.password "
            "(or write them in mqtt.url) first"
        )
    lines = [f"{daemon_user}:{hash_password(password)}"]
    missing = []
    for p in principals:
        if p.broker_password_hash:
            lines.append(f"{p.name}:{p.broker_password_hash}")
        else:
            missing.append(p.name)
    # The local admin's account, so `labd submit` on this host works through Mosquitto too.
    local = None
    if settings.auth.local_credentials:
        local = _local_credentials(settings.daemon.state_path)
    if local is not None:
        lines.append(f"{local.broker_username}:{hash_password(local.broker_password)}")
        principals.append(local.as_local_principal())
    out = Path(args.out)
    _write_private(out / "passwd", "\n".join(lines) + "\n", force=True)
    (out / "acl").write_text(mosquitto_acl(prefix, Principals(principals), [daemon_user]))
    readable = _give_to_broker(out / "passwd", out / "acl")
    print(f"wrote {out / 'passwd'} and {out / 'acl'}; in mosquitto.conf:")
    print(f"  allow_anonymous false\n  password_file {out / 'passwd'}\n  acl_file {out / 'acl'}")
    print(readable)
    if local is None:
        print(
            f"no local admin account: {settings.daemon.state_path / LOCAL_FILE} does not exist "
            "yet (start labd once, then run this again) or is not readable by this user"
        )
    if missing:
        print(f"no broker password (cannot connect): {', '.join(missing)}")
    return 0


def _local_credentials(state_dir: Path) -> Credentials | None:
    path = state_dir / LOCAL_FILE
    return read_credentials(path) if os.access(path, os.R_OK) else None


def _give_to_broker(passwd: Path, acl: Path) -> str:
    """Let the broker read the files: Mosquitto runs as its own user and reads them after it
    drops root (it warns about, and will refuse, files it does not own)."""
    try:
        broker = pwd.getpwnam(BROKER_USER)
    except KeyError:
        return (
            f"no {BROKER_USER!r} user here: make {passwd} readable by the account the broker "
            "runs as (it is 0600, owned by you)"
        )
    if os.geteuid() != 0:
        return f"run as root to give {passwd} to the {BROKER_USER!r} user, or chown it yourself"
    for path in (passwd, acl):
        os.chown(path, broker.pw_uid, broker.pw_gid)
    passwd.chmod(0o640)
    return f"both owned by {BROKER_USER!r}, passwd mode 0640"


def whoami(args: argparse.Namespace) -> int:
    settings = load_config(args.config).settings
    creds = find_credentials(settings.daemon.state_path)
    if creds is None:
        raise UsageError("no credentials found (LABD_CREDENTIALS, ~/.config/labd, state dir)")
    view = {"principal": creds.principal, "key_id": creds.key_id, "file": str(creds.path)}
    print(json.dumps(view) if args.json else f"{creds.principal} ({creds.path})")
    return 0

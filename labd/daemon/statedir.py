"""The state directory, private to labd: its database holds every job's parameters (variables
such as a test's API token included), so nobody else may read it."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
from pathlib import Path

from labd.errors import ConfigError, LabdError

# Others may reach api.sock by its name (their credentials decide what they may do there), but
# may not list the directory or read what is in it.
STATE_DIR_MODE = 0o711
PRIVATE_DIR_MODE = 0o700
DATABASE_FILES = ("labd.db", "labd.db-wal", "labd.db-shm")
PID_FILE = "labd.pid"  # SQLite gives -wal/-shm the db's mode
CREDENTIALS_DIR = "credentials"  # labd.auth's LOCAL_FILE lives in it


def prepare_state_dir(path: Path, sqlite: bool) -> None:
    """Create the state directory, or tighten one an older labd left readable by everyone;
    `sqlite` when the database is the default one in it."""
    try:
        path.mkdir(mode=STATE_DIR_MODE, parents=True, exist_ok=True)
        _tighten(path, STATE_DIR_MODE)
        for private in ("jobs", "archives"):  # artefacts; the replay archives an admin puts there
            (path / private).mkdir(mode=PRIVATE_DIR_MODE, exist_ok=True)
            _tighten(path / private, PRIVATE_DIR_MODE)
    except OSError as e:  # e.g. under /proc, or read-only: the key to change, not a traceback
        where = f" ({e.filename})" if e.filename and str(e.filename) != str(path) else ""
        reason = f"{e.strerror or e}{where}"
        raise ConfigError(
            [f"daemon.state_dir: cannot use {path} as the state directory: {reason}"]
        ) from None
    if sqlite:
        with contextlib.suppress(FileExistsError):  # SQLite then keeps the mode it finds
            os.close(os.open(path / DATABASE_FILES[0], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for name in DATABASE_FILES:
        _tighten(path / name, 0o600)
    # The local admin's credentials (labd.auth): left listable by hand, say, its folder is
    # taken back too; the file itself is made 0600 whenever it is written.
    _tighten(path / CREDENTIALS_DIR, PRIVATE_DIR_MODE)
    for key_file in _regular_files(path / CREDENTIALS_DIR):
        _tighten(key_file, 0o600)


def lock_state_dir(path: Path) -> int:
    """Hold `labd.pid` in the state directory locked for the daemon's life (the open file
    returned; closing it, or the process ending, lets go). A second `labd run` on the same
    directory took back the first one's running job as its own and cut its MQTT session
    before it failed on the API socket: now it stops here, before it touches anything."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(path / PID_FILE, flags, 0o644)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file")
    except OSError as e:  # a link, a directory, a pipe left there; a read-only file system
        raise LabdError(
            f"cannot start: {path / PID_FILE}: {e.strerror or e} (labd keeps its pid there, in "
            "a regular file it may write)"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise LabdError(
            f"another labd (pid {holder}) runs on the state directory {path}: stop it first, "
            "or give this one a daemon.state_dir of its own"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def state_dir_id(path: Path) -> str:
    """A short name of the state directory `path` (its resolved path hashed): /healthz says
    it, so `labd status` can tell its own daemon from another one on the same port without
    the side port telling anyone where labd keeps its files."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]


def daemon_on(path: Path) -> bool | None:
    """Whether a labd runs on the state directory `path` (holds its pid file locked); None
    when this account cannot tell (it may not open the file)."""
    try:
        fd = os.open(path / PID_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # a lock taken here goes with it
    return False


def _tighten(path: Path, mode: int) -> None:
    """Take away what `mode` does not grant from a directory or a regular file; a path owned
    by someone else is left alone (an administrator's choice, and labd could not change it
    anyway), and so is anything else: a link is not followed (a `labd.db-wal` pointing at
    /dev/null made labd, as root, take /dev/null from everyone)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return
    if info.st_uid == os.geteuid() and info.st_mode & 0o777 & ~mode:
        path.chmod(info.st_mode & 0o777 & mode)


def _regular_files(folder: Path) -> list[Path]:
    """The files directly in `folder` (none when it is missing, no folder, or a link: what
    it points at is not labd's to change)."""
    if folder.is_symlink():
        return []
    try:
        return [entry for entry in folder.iterdir() if entry.is_file() and not entry.is_symlink()]
    except OSError:
        return []

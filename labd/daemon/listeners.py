"""The sockets the HTTP side listens on, and who is at the other end of a Unix socket."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labd.config import Settings
from labd.errors import LabdError

# sockaddr_un holds 108 bytes; a deeper path is reached through its directory's descriptor.
MAX_UNIX_PATH = 100


@dataclass(frozen=True)
class Peer:
    """The process at the other end of a Unix socket, as the kernel tells it (SO_PEERCRED)."""

    pid: int
    uid: int
    gid: int


def api_socket_path(settings: Settings) -> Path:
    """Where the API's Unix socket is: http.api_socket, else api.sock in the state directory."""
    if settings.http.api_socket:
        return Path(settings.http.api_socket).expanduser()
    return settings.daemon.state_path / "api.sock"


BACKLOG = 128  # connections waiting to be accepted, per listener


def tcp_socket(host: str, port: int, what: str) -> socket.socket:
    """A TCP socket bound to host:port and not yet listening (a client is refused, as when
    nothing is there, until `listen`): labd takes its ports before anything else starts.
    LabdError naming `what`, the address and the reason."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise cannot_listen(e, f"{what}: cannot listen on {host}:{port}") from e
    return sock


def cannot_listen(e: OSError, where: str) -> LabdError:
    """`where`: the reason, and what to do about a port another program holds."""
    reason = os.strerror(e.errno) if e.errno else str(e)
    if e.errno == errno.EADDRINUSE:
        reason += " (another labd or program listens there: set another port)"
    return LabdError(f"{where}: {reason}")


def unix_socket(path: Path, what: str) -> socket.socket:
    """A listening Unix socket at `path`, connectable by every local account (the peer's
    credentials, not the file's mode, decide what it may do). A socket left behind by a daemon
    that died is replaced; anything else at that path is an error."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with reachable(path) as address:
            if _is_stale_socket(address):
                Path(address).unlink()
            sock.bind(address)
            _open_to_everyone(address)
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        raise LabdError(f"{what}: cannot listen on {path}: {e.strerror or e}") from e
    return sock


def _open_to_everyone(address: str) -> None:
    """Mode 0666 for the socket just bound at `address`, and for nothing else: a path in a
    shared directory may have been swapped for a symbolic link meanwhile, so the file is
    opened without following links and changed only if it is a socket."""
    fd = os.open(address, os.O_PATH | os.O_NOFOLLOW)
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise OSError(f"{address} is no longer the socket labd bound")
        Path(f"/proc/self/fd/{fd}").chmod(0o666)
    finally:
        os.close(fd)


def remove_socket(path: Path) -> None:
    """Remove the socket file at `path` (the daemon is stopping); nothing if it is gone."""
    with contextlib.suppress(OSError), reachable(path) as address:
        Path(address).unlink()


def _is_stale_socket(address: str) -> bool:
    try:
        if not stat.S_ISSOCK(Path(address).stat().st_mode):
            return False  # not ours to remove: bind will say the path is taken
    except FileNotFoundError:
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(address)
        except ConnectionRefusedError:
            return True  # a socket file nobody listens on
        except OSError:
            return False
    raise OSError(f"another process already listens on {address}")


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """An address for `path` that fits in sockaddr_un: the path itself when short enough, else
    the same file reached through an open descriptor of its directory (Linux)."""
    text = str(path)
    if len(text.encode()) <= MAX_UNIX_PATH:
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def peer_of(sock: Any) -> Peer | None:
    """The peer of a Unix socket connection (a socket or asyncio's wrapper of one); None for
    any other kind of socket."""
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    size = struct.calcsize("3i")
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size)
    pid, uid, gid = struct.unpack("3i", raw)
    return Peer(pid, uid, gid)

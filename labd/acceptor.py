"""Accepting connections without running out of file descriptors, for every server labd runs
(the daemon's HTTP listeners, the replay server).

A server that takes whatever connects can be made to spend every descriptor its process has:
clients that open connections and never finish a request. Here each listener holds at most
`max_connections` accepted connections open (past that, new clients wait in the listen queue),
and an accept that fails for want of descriptors or buffers (EMFILE, ENFILE, ENOBUFS) is
retried after a backoff of 50 ms doubling to 2 s, so the listener serves again as soon as a
flood leaves. Each of these is logged at most once a minute per listener: asyncio's own
accept loop logged "socket.accept() out of system resource" thousands of times a second.
Timing out a request that never finishes is the protocol's job (aiohttp's keep-alive timer).
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from labd.tasks import TaskSet
from labd.throttle import OncePerMinute

log = structlog.get_logger("labd.acceptor")

RESERVED_FDS = 64  # for what a server opens besides its clients: files, logs, the event loop's
BACKOFF_S = (0.05, 2.0)  # an accept that failed is retried after this, doubling
WARN_EVERY_S = 60.0
UNLIMITED_FDS = 2**20  # what RLIM_INFINITY stands for in the arithmetic (Linux's nr_open)
# The soft limit this process was started with: the programs it starts get it back, since a
# raised one is for labd's own servers (and a program may size its tables by it).
SOFT_OPEN_FILES_AT_START = resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE: how many descriptors this process may hold open."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UNLIMITED_FDS if soft == resource.RLIM_INFINITY else soft


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one, as systemd advises for programs that do not
    use select() (its soft default of 1024 exists for those alone); (before, after). An
    unlimited hard limit raises it to 2**20 (Linux's default nr_open); a refusal leaves it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = open_files_limit()
    # An unlimited hard limit: the kernel takes no more than nr_open for a soft one.
    wanted = UNLIMITED_FDS if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return before, open_files_limit()


def connection_limit(fds_per_connection: int = 1) -> int:
    """How many clients may be connected at once: what RLIMIT_NOFILE leaves after a reserve,
    shared by the descriptors each one needs (two when recording: the client's and the
    origin's)."""
    return max(1, (open_files_limit() - RESERVED_FDS) // fds_per_connection)


class Acceptor:
    """Accepts connections on a listening socket and hands each to `connect`, which owns it
    from then on (and closes it when it fails), with at most `max_connections` open at once.
    Its tasks (the accept loop, each connection's `connect`) run in `tasks`: cancel them and
    close the socket to stop it."""

    def __init__(
        self,
        sock: socket.socket,
        connect: Callable[[socket.socket], Awaitable[None]],
        max_connections: int,
        tasks: TaskSet,
        name: str,
    ) -> None:
        sock.setblocking(False)
        self.sock, self.connect, self.tasks, self.name = sock, connect, tasks, name
        self.max_connections = max_connections
        self.open: set[socket.socket] = set()  # accepted; closed ones pruned at the cap
        self._said = OncePerMinute(WARN_EVERY_S)

    def start(self) -> None:
        self.tasks.spawn(f"accept {self.name}", self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        backoff = BACKOFF_S[0]
        while True:
            if not self._room():  # closed connections are noticed at the next count
                self._warn("connection limit reached; new clients wait", limit=len(self.open))
                await asyncio.sleep(BACKOFF_S[0])
                continue
            try:
                conn, _ = await loop.sock_accept(self.sock)
            except OSError as e:  # out of descriptors or buffers: wait for some to be freed
                self._warn(
                    "accept failed; retrying", error=e.strerror or str(e), open=len(self.open)
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_S[1])
                continue
            backoff = BACKOFF_S[0]
            self.open.add(conn)
            if conn.family in (socket.AF_INET, socket.AF_INET6):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.tasks.spawn("connection", self._connect(conn))

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self.connect(conn)
        except BaseException:  # cancelled while setting up: the descriptor is ours to free
            conn.close()
            raise

    def _warn(self, event: str, **fields: Any) -> None:
        """At most one line a minute of each kind: a flood would otherwise write one per client
        (or per failed accept)."""
        if (left_out := self._said.due(event)) is not None:
            log.warning(event, listener=self.name, left_out=left_out, **fields)

    def _room(self) -> bool:
        """Whether one more client fits; counting what is still open only when near the cap."""
        if len(self.open) >= self.max_connections:
            self.open = {conn for conn in self.open if conn.fileno() != -1}
        return len(self.open) < self.max_connections

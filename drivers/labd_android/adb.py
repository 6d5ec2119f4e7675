"""The adb server as the driver reaches it: every request bounded in time, every failure an
InfrastructureError that names the server or device and what came back, and the blocking
calls on threads of the driver's own.

adbutils waits 600 s (or for ever) on its own requests by default, and `asyncio.timeout` only
stops the wait, not the thread: an adb server that accepts and never answers, or a phone whose
`dumpsys` hangs, used to leave one blocked thread per pool round on the event loop's default
executor, until labd's other work queued behind them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import adbutils

from labd.sdk import InfrastructureError
from labd_android.names import shown

# The longest the adb server or a phone may take to answer one of the driver's own requests
# (a listing, a state, a connection's opening, a `getprop` or `dumpsys`).
ADB_TIMEOUT_S = 10.0
# What adbutils raises on a server or device that fails, hangs up, times out or garbles its
# answer (a length or a number that is not one: ValueError from int()).
ADB_ERRORS = (adbutils.AdbError, OSError, EOFError, ValueError)
THREADS = 8  # blocking calls at once; more wait their turn

T = TypeVar("T")


class Connection(adbutils.AdbConnection):  # type: ignore[misc]
    """adbutils' connection, taking what the protocol sized only whole: its read_string took
    an answer cut short (a server that promised 256 bytes of device list and hung up after 18)
    for the whole, and every phone past the cut looked unplugged."""

    def read_string(self, n: int) -> str:
        data: bytes = self.read(n)
        if len(data) < n:
            raise EOFError(
                f"the answer ended after {len(data)} of {n} bytes"
                if data
                else "the connection closed without an answer"
            )
        return data.decode("utf-8", errors="replace")


class Client(adbutils.AdbClient):  # type: ignore[misc]  # adbutils is Any to mypy (pyproject)
    """adbutils' client, with every connection's requests bounded by ADB_TIMEOUT_S (a caller
    that reads longer, a shell command or a stream, sets its own time-out once connected),
    its answers read whole (Connection)."""

    def make_connection(self, timeout: float | None = None) -> Connection:
        try:
            connection = Connection(self.host, self.port)
        except TimeoutError as e:
            raise adbutils.AdbTimeout("connect to adb server timeout") from e
        connection.conn.settimeout(min(timeout or ADB_TIMEOUT_S, ADB_TIMEOUT_S))
        return connection

    def listed(self) -> list[tuple[str, str]]:
        """(serial, state) of every device the server lists. adbutils split each line at any
        white space: a serial holding a space read as the serial's first word in the state
        its second. The server writes `serial<TAB>state`; a line without a tab is garbled."""
        with self.make_connection() as c:
            c.send_command("host:devices")
            c.check_okay()
            answer = c.read_string_block()
        devices = []
        for line in answer.splitlines():
            serial, tab, state = line.rpartition("\t")
            if not tab:
                raise ValueError(f"a device line without a tab: {shown(line, 80)}")
            devices.append((serial, state))
        return devices


def failure(where: str, e: BaseException, timeout: float | None = None) -> InfrastructureError:
    """The error to raise from `e` (one of ADB_ERRORS) met at `where` (`adb server HOST:PORT`,
    `device SERIAL: COMMAND`) while waiting up to `timeout` (None: ADB_TIMEOUT_S)."""
    if isinstance(e, adbutils.AdbTimeout | TimeoutError):
        what = f"no answer within {timeout or ADB_TIMEOUT_S:g} s"
    elif isinstance(e, ValueError):
        what = f"garbled answer ({e})"
    else:
        what = str(e) or type(e).__name__
        if len(what) > 200 or not (what.isascii() and what.isprintable()):
            what = shown(what, 200)  # a server's FAIL text, as it sent it
    return InfrastructureError(f"{where}: {what}")


class Threads:
    """The driver's blocking calls, on at most THREADS threads of its own. A call still running
    (a hung device) is joined by the next caller with the same key, not started again, so a
    pool round every few seconds cannot pile up threads or queue behind them."""

    def __init__(self) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(THREADS, "labd-android")
        self.running: dict[Hashable, asyncio.Future[Any]] = {}

    async def call(self, key: Hashable, function: Callable[..., T], *args: Any) -> T:
        future = self.running.get(key)
        if future is None:
            future = asyncio.get_running_loop().run_in_executor(self.pool, function, *args)
            self.running[key] = future
            future.add_done_callback(lambda _: self.running.pop(key, None))
        # A caller's time-out cancels its own wait, never the call the next caller joins.
        result: T = await asyncio.shield(future)
        return result

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

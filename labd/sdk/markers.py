"""Marker streams: the lines a device logs while a test runs (Raptor's performance marks in
`adb logcat`, a browser's console), handed to a scenario as they come.

`LineStream` is the usual implementation: a driver gives it a blocking reader (a socket, a
pipe) and it runs that reader on a thread of its own, so the event loop never waits on it.
The end of the stream and a reader's failure are carried as such, not as magic lines a
device could print itself.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from labd.errors import InfrastructureError

MAX_PENDING_LINES = 100_000  # unread lines kept; older ones are dropped (and counted)


@runtime_checkable
class MarkerStream(Protocol):
    async def open(self) -> None:
        """Start receiving (lines from before this call may be missing)."""

    def clear(self) -> None:
        """Forget the lines received so far: the next ones belong to what happens next."""

    async def next_line(self) -> str:
        """The next line, once it comes (bound the wait with `asyncio.timeout`);
        InfrastructureError, naming the stream, once it ended or failed."""

    async def close(self) -> None: ...


class LineStream(ABC):
    """A MarkerStream over a blocking reader. Subclasses give `read_lines` (blocking, yields
    lines until the source ends) and `interrupt` (makes a blocked read return: close the
    socket or kill the process)."""

    ended_reason = "ended"  # what the source's end means, in the error a reader then gets

    def __init__(self, name: str) -> None:
        self.name = name
        self.dropped = 0  # lines lost because nobody read them in time
        # Shared with the reader's thread: a deque's append and popleft are thread-safe.
        self._lines: collections.deque[str] = collections.deque(maxlen=MAX_PENDING_LINES)
        self._end: str | None = None  # why the source ended, once it has (set by the thread)
        self._arrived = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._wake_lock = threading.Lock()
        self._wake_pending = False  # one wake-up call queued on the loop serves many lines

    @abstractmethod
    def read_lines(self) -> Iterator[str]:
        """Runs on the stream's thread: the lines as they come, until the source ends."""

    def interrupt(self) -> None:
        """Called from the event loop's thread on close: unblock `read_lines`."""

    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.Thread(target=self._pump, name=self.name, daemon=True)
        self._thread.start()

    def clear(self) -> None:
        self._lines.clear()

    async def next_line(self) -> str:
        while not self._lines:
            if self._end is not None:
                raise InfrastructureError(f"{self.name}: {self._end}")
            self._arrived.clear()
            await self._arrived.wait()
        return self._lines.popleft()

    async def close(self) -> None:
        self._closing.set()
        self.interrupt()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5)

    def _pump(self) -> None:
        why = self.ended_reason
        try:
            for line in self.read_lines():
                if len(self._lines) == MAX_PENDING_LINES:
                    self.dropped += 1
                self._lines.append(line)
                self._wake()
                if self._closing.is_set():
                    break
        except Exception as e:  # the reader's failure is the stream's end, with its reason
            why = f"failed: {e or type(e).__name__}"
        self._end = why  # after the last line: a reader gets every line first
        self._wake()

    def _wake(self) -> None:
        with self._wake_lock:
            if self._wake_pending:
                return
            self._wake_pending = True
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            self._loop.call_soon_threadsafe(self._woken)

    def _woken(self) -> None:
        with self._wake_lock:
            self._wake_pending = False
        self._arrived.set()

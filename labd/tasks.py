"""Named background tasks whose references are kept and whose crashes are logged, not lost.

A long-lived loop is `supervise`d: when it fails it is restarted after a backoff (doubling,
with jitter), and the bus hears `ComponentDown` and, once it has run a while again,
`ComponentUp`, so /readyz, the metrics and the host's status say what is down. No task can
end silently.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine
from typing import Any

import structlog

from labd.events import ComponentDown, ComponentUp, EventBus

log = structlog.get_logger("labd.tasks")

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 10.0  # a restarted loop that ran this long counts as up again


class TaskSet:
    """Owns a group of named tasks: keeps them alive, logs a crash, cancels them together."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Start coro as a task named `<owner>:<name>`; the set holds it until it ends."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.owner}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def supervise(
        self,
        name: str,
        factory: Callable[[], Coroutine[Any, Any, Any]],
        bus: EventBus | None = None,
        backoff_max_s: float = BACKOFF_MAX_S,
    ) -> asyncio.Task[Any]:
        """Run the loop `factory()` makes, and make it again whenever it fails or returns."""
        return self.spawn(
            name, self._supervised(f"{self.owner}:{name}", factory, bus, backoff_max_s)
        )

    async def _supervised(
        self,
        component: str,
        factory: Callable[[], Coroutine[Any, Any, Any]],
        bus: EventBus | None,
        backoff_max_s: float,
    ) -> None:
        delay = BACKOFF_FIRST_S
        down = False
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            marker = loop.call_later(HEALTHY_AFTER_S, self._up, component, bus) if down else None
            try:
                await factory()
                error = "ended unexpectedly"
            except asyncio.CancelledError:
                raise
            except Exception as e:
                error = f"{type(e).__name__}: {e}"
                log.error("task failed; restarting", task=component, error=error, exc_info=e)
            finally:
                if marker is not None:
                    marker.cancel()
            if loop.time() - started >= HEALTHY_AFTER_S:
                delay = BACKOFF_FIRST_S  # it had been running well: a fresh failure
            wait = min(delay, backoff_max_s) * random.uniform(0.75, 1.25)
            if bus is not None:
                bus.publish(ComponentDown(component=component, error=error, retry_in_s=wait))
            down = True
            await asyncio.sleep(wait)
            delay = min(delay * 2, backoff_max_s)

    @staticmethod
    def _up(component: str, bus: EventBus | None) -> None:
        log.info("task running again", task=component)
        if bus is not None:
            bus.publish(ComponentUp(component=component))

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("task crashed", task=task.get_name(), exc_info=exc)

    def __len__(self) -> int:
        return len(self._tasks)

    async def cancel_all(self, grace: float = 5.0) -> None:
        """Cancel every task and wait up to `grace` seconds for them to finish."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                log.warning("task ignored cancellation", task=task.get_name())


# The same failure again is said at least this often, however many come between.
REPEAT_EVERY_S = 60.0


class Failures:
    """A loop's failures, logged without flooding: the first of a kind with its traceback, the
    same error again as one line with the count so far, at the 2nd, 4th, 8th... failure and at
    least once a minute, and the recovery. A database away for a minute used to write a
    100-line traceback every second from each loop, then a line a second."""

    def __init__(self, what: str, logger: Any = log) -> None:
        self.what, self.log = what, logger  # the loop's own logger names its module
        self.count = 0
        self._last: tuple[type[BaseException], str] | None = None
        self._said_at = 0.0

    def failed(self, error: Exception, **fields: Any) -> None:
        self.count += 1
        kind = (type(error), str(error))
        now = time.monotonic()
        if kind != self._last:
            self._last, self._said_at = kind, now
            self.log.error(f"{self.what} failed; trying again", exc_info=error, **fields)
        elif self.count & (self.count - 1) == 0 or now - self._said_at >= REPEAT_EVERY_S:
            self._said_at = now
            self.log.warning(
                f"{self.what} failed again; trying again",
                error=repr(error),
                failures=self.count,
                **fields,
            )

    def succeeded(self) -> None:
        if self.count:
            self.log.info(f"{self.what} works again", failures=self.count)
        self.count, self._last = 0, None

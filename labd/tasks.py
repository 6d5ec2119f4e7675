"""Named background tasks whose references are kept and whose crashes are logged, not lost."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

log = structlog.get_logger("labd.tasks")


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

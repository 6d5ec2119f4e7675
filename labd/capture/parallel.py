"""Per-frame work on every core, results in frame order, a bounded number in flight.

OpenCV releases the GIL in its kernels, so threads scale; frames are shared, not copied."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def ordered_map(
    work: Callable[[T], R], items: Iterable[T], workers: int | None = None
) -> Iterator[tuple[T, R]]:
    """Yield (item, work(item)) in the items' order, keeping at most 2 per worker pending."""
    workers = workers or os.cpu_count() or 1
    pending: deque[tuple[T, Future[R]]] = deque()
    with ThreadPoolExecutor(workers, thread_name_prefix="frames") as pool:
        for item in items:
            pending.append((item, pool.submit(work, item)))
            if len(pending) >= 2 * workers:
                first, future = pending.popleft()
                yield first, future.result()
        while pending:
            first, future = pending.popleft()
            yield first, future.result()

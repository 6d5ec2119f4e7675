"""Input dispatch latency, kept with the iteration that sent the events.

An input driver appends one figure per dispatch to its `latencies_ms` list (Android: the
persistent shell's round trip for one `cmd input` command; X11: from the first XTEST request
of an event to the server's reply to the sync that follows it). A scenario takes the list at
the end of each iteration: p50 and p95 become values, the raw list an artefact beside the
video, so a slow or jittery input path is seen next to the numbers it may have moved.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from labd.model import MetricSpec

P50, P95 = "input_latency_p50_ms", "input_latency_p95_ms"
LATENCY_METRICS = (MetricSpec(name=P50, unit="ms"), MetricSpec(name=P95, unit="ms"))
ARTIFACT = "input-latency.json"


@runtime_checkable
class TimedInput(Protocol):
    """An input whose every dispatch is timed (ms, in the order sent)."""

    latencies_ms: list[float]


@contextmanager
def timed(into: list[float]) -> Iterator[None]:
    """Appends the block's duration in ms to `into` (also when it raises: a failed dispatch
    took that long too)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        into.append((time.perf_counter() - began) * 1000)


def take_latencies(device_input: object) -> list[float]:
    """The dispatch times recorded since the last call (an untimed input gives [])."""
    if not isinstance(device_input, TimedInput):
        return []
    taken = list(device_input.latencies_ms)
    device_input.latencies_ms.clear()
    return taken


def latency_values(latencies: list[float]) -> dict[str, float]:
    """p50 and p95 in ms; {} when no event was sent (nothing to report, not a zero)."""
    if not latencies:
        return {}
    p50, p95 = np.percentile(np.asarray(latencies), [50, 95])
    return {P50: round(float(p50), 3), P95: round(float(p95), 3)}


def keep_latencies(
    latencies: list[float], folder: Path, fingerprint: dict[str, Any]
) -> dict[str, float]:
    """Writes the raw list to `folder`/input-latency.json, names it among the iteration's
    artefacts, and gives the values to report."""
    if not latencies:
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ARTIFACT
    path.write_text(json.dumps({"unit": "ms", "dispatch": [round(v, 4) for v in latencies]}))
    fingerprint.setdefault("artifacts", {})["input_latency"] = str(path)
    return latency_values(latencies)

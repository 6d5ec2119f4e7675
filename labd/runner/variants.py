"""The order of an A/B job's iterations: base and new alternate in blocks on one device, or
each pair of blocks in a random order, so drift over the job hits both variants alike."""

from __future__ import annotations

import random
from dataclasses import dataclass

from labd.model import TestSpec


@dataclass(frozen=True)
class Slot:
    variant: str  # "" for a job without variants
    warmup: bool


def schedule(spec: TestSpec) -> list[Slot]:
    """Every planned iteration in the order it runs: warm-ups first (interleaved too), then
    the measured ones. A job without variants runs its iterations in a row."""
    if spec.ab is None:
        return [Slot("", i < spec.warmup) for i in range(spec.warmup + spec.iterations)]
    return _interleave(spec, True, spec.warmup) + _interleave(spec, False, spec.iterations)


def _interleave(spec: TestSpec, warmup: bool, count: int) -> list[Slot]:
    assert spec.ab is not None
    block, rng = spec.ab.block, random.Random(f"{spec.ab.seed}:{warmup}")
    slots: list[Slot] = []
    done = 0
    while done < count:
        size = min(block, count - done)
        pair = ["base", "new"]
        if spec.ab.order == "random":
            rng.shuffle(pair)
        for variant in pair:
            slots += [Slot(variant, warmup)] * size
        done += size
    return slots

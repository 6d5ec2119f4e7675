"""Order statistics of all pairwise differences new[i] - base[j], without forming the m x n of
them: the Hodges-Lehmann shift and its Mann-Whitney interval are such order statistics.

Small inputs sort the differences outright (the answer is the same, and it is faster there).
Larger ones select the k-th smallest by shrinking, per new value, the range of base values that
can still hold it (a randomised form of Johnson and Mizoguchi's selection in X + Y): memory is
linear in m + n, and each round costs one sorted search of the m new values in the n base ones.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

# Up to this many differences (32 MB of float64) the sorted array itself is the fastest way.
OUTRIGHT_LIMIT = 4_000_000
# Fewer candidates than this left: gather them and finish with one partition.
GATHER_LIMIT = 1_000_000

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def _at_most(new: Floats, base: Floats, pivot: float, strict: bool) -> Ints:
    """Per new value, how many differences new[i] - base[j] are <= pivot (< pivot if strict).
    base is sorted, so they are a suffix of it. The sorted search guesses where it begins; the
    exact floating-point differences decide, by bisection on the rows where the guess is off
    (rounding can put it on the wrong side of a whole run of tied values: thousands of equal
    timings once made a one-step correction loop give wrong counts, and `compare` spin)."""
    n = base.size

    def counted(rows: Ints, j: Ints) -> NDArray[np.bool_]:
        """Whether new[rows] - base[j] counts (j < n); monotone in j: false, then true."""
        difference = new[rows] - base[j]
        return difference < pivot if strict else difference <= pivot

    cut = np.searchsorted(base, new - pivot, side="left").astype(np.int64)
    rows = np.arange(new.size)
    at, before = np.minimum(cut, n - 1), np.maximum(cut - 1, 0)
    right = ((cut == n) | counted(rows, at)) & ((cut == 0) | ~counted(rows, before))
    off = rows[~right]
    low, high = np.zeros(off.size, np.int64), np.full(off.size, n, np.int64)
    while (open_ := low < high).any():  # the first j that counts, in [low, high]
        mid = (low + high) // 2
        holds = counted(off, np.minimum(mid, n - 1)) & open_
        high = np.where(holds, mid, high)
        low = np.where(open_ & ~holds, mid + 1, low)
    cut[off] = low
    return n - cut


def _select(new: Floats, base: Floats, ranks: list[int], rng: np.random.Generator) -> list[float]:
    """The differences of the given 0-based ranks; new and base sorted ascending."""
    return [_select_one(new, base, k, rng) for k in ranks]


def _select_one(new: Floats, base: Floats, k: int, rng: np.random.Generator) -> float:
    n = base.size
    # Row i holds new[i] - base[n - 1 - r] at its rank r (ascending); ranks in [low, high) of
    # each row are the candidates left.
    low = np.zeros(new.size, dtype=np.int64)
    high = np.full(new.size, n, dtype=np.int64)
    below = 0  # differences known to be smaller than the answer
    while True:
        width = high - low
        left = int(width.sum())
        if left <= GATHER_LIMIT:
            rows = np.repeat(np.arange(new.size), width)
            starts = np.repeat(np.cumsum(width) - width, width)
            ranks = low[rows] + (np.arange(left) - starts)
            values = new[rows] - base[n - 1 - ranks]
            return float(np.partition(values, k - below)[k - below])
        pick = int(rng.integers(left))
        ends = np.cumsum(width)
        row = int(np.searchsorted(ends, pick, side="right"))
        offset = pick - int(ends[row - 1]) if row else pick
        pivot = float(new[row] - base[n - 1 - (low[row] + offset)])
        at_most = _at_most(new, base, pivot, strict=False)
        if int(at_most.sum()) <= k:  # the answer is larger than the pivot
            low = np.maximum(low, at_most)
            below = int(low.sum())
            continue
        less = _at_most(new, base, pivot, strict=True)
        if int(less.sum()) <= k:  # the answer is the pivot itself
            return pivot
        high = np.minimum(high, less)


def pairwise_quantiles(new: Floats, base: Floats, ranks: list[int]) -> list[float]:
    """The differences new[i] - base[j] of the given 0-based ranks among all m * n of them,
    exactly as sorting them all would give, in memory linear in m + n."""
    a, b = np.sort(new), np.sort(base)
    if a.size * b.size <= OUTRIGHT_LIMIT:
        diffs = np.subtract.outer(a, b).ravel()
        return [float(v) for v in np.partition(diffs, ranks)[ranks]]
    return _select(a, b, ranks, np.random.default_rng(0))


def pairwise_median(new: Floats, base: Floats) -> float:
    """The median of all pairwise differences (the Hodges-Lehmann shift), as np.median of
    them all would give."""
    total = new.size * base.size
    low = pairwise_quantiles(new, base, [(total - 1) // 2])[0]
    if total % 2:
        return low
    return (low + _next_above(np.sort(new), np.sort(base), low, total // 2)) / 2


def _next_above(new: Floats, base: Floats, value: float, rank: int) -> float:
    """The difference of 0-based `rank`, given `value`, the one just below it in rank."""
    at_most = _at_most(new, base, value, strict=False)
    if int(at_most.sum()) > rank:
        return value  # a tie
    n = base.size
    open_rows = at_most < n
    return float((new[open_rows] - base[n - 1 - at_most[open_rows]]).min())

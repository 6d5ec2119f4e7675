"""Bootstrap medians in memory linear in the sample.

Up to RESAMPLE_LIMIT values the resamples are drawn as always, a block at a time (the same
draws, so the same interval, as one 2,000 x n array gave). Above it, resampling costs
2,000 x n draws for a figure the data already fix: the median of a resample is at most the
j-th smallest value exactly when at least half the draws are, so its distribution over the
sorted values is binomial (Efron, 1979) and the bootstrap medians are drawn from it directly.
For an even count this takes the lower of the two middle values of each resample, which above
RESAMPLE_LIMIT values moves an interval by less than the gap between neighbouring values.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

RESAMPLES = 2000
RESAMPLE_LIMIT = 10_000
BLOCK_VALUES = 1_000_000  # values drawn at a time: 8 MB of indices


def median_resamples(
    a: NDArray[np.float64], rng: np.random.Generator, count: int = RESAMPLES
) -> NDArray[np.float64]:
    """The medians of `count` bootstrap resamples of a."""
    n = a.size
    if n > RESAMPLE_LIMIT:
        from scipy import special

        ordered = np.sort(a)
        middle = (n + 1) // 2
        # P(median of a resample <= j-th smallest) = P(Binomial(n, j / n) >= middle)
        cdf = special.bdtrc(middle - 1, n, np.arange(1, n + 1) / n)
        at = np.minimum(np.searchsorted(cdf, rng.random(count), side="left"), n - 1)
        return ordered[at]
    rows = max(1, BLOCK_VALUES // n)
    medians = [
        np.median(a[rng.integers(0, n, (min(rows, count - done), n))], axis=1)
        for done in range(0, count, rows)
    ]
    return np.concatenate(medians)

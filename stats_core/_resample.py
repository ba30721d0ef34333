"""The shared resampling engine: seeded generators and blocks of permuted labels / resample indices.

All random draws happen here, in Python, from ``numpy.random.default_rng(seed)``; kernels receive the drawn
indices. That is why every backend gives the same answer for the same seed. Permutations are drawn one
``rng.permutation(codes)`` at a time, in the order scikit-bio draws them, so its p-values are reproduced
exactly for the same integer seed. Work proceeds in blocks so memory is bounded by the block, not by the
number of permutations.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from stats_core.errors import InvalidInputError

# Label cells (permutations × n) generated per block: 4 MiB of int32.
BLOCK_CELLS = 1 << 20
# A permuted statistic within this relative distance of the observed one counts as "at least as
# extreme" (vegan uses an absolute EPS): p-values then do not depend on a backend's summation order.
TIE_RTOL = 1e-9


def generator(seed: object) -> tuple[np.random.Generator, int]:
    """``numpy.random.default_rng(seed)`` and the integer seed to record (fresh OS entropy when None)."""
    if seed is None:
        seed = int(np.random.SeedSequence().entropy)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidInputError("seed", f"expected a non-negative integer or None, got {seed!r}")
    return np.random.default_rng(int(seed)), int(seed)


def permuted_label_blocks(rng: np.random.Generator, codes: np.ndarray, permutations: int) -> Iterator[np.ndarray]:
    """Blocks of (≤ block, n) int32 rows, each ``rng.permutation(codes)``; ``permutations`` rows in all."""
    n = codes.shape[0]
    block = max(1, min(permutations, BLOCK_CELLS // max(n, 1)))
    for start in range(0, permutations, block):
        rows = min(block, permutations - start)
        out = np.empty((rows, n), dtype=np.int32)
        for r in range(rows):
            out[r] = rng.permutation(codes)
        yield out


def count_at_least(permuted: np.ndarray, observed: float) -> int:
    """Number of permuted statistics ≥ the observed one (ties within TIE_RTOL count)."""
    if np.isposinf(observed):
        return int(np.isposinf(permuted).sum())
    return int((permuted >= observed - TIE_RTOL * abs(observed)).sum())


def permutation_pvalue(permuted_count: int, permutations: int) -> float:
    """(k + 1) / (permutations + 1); NaN when there were no permutations."""
    return float("nan") if permutations == 0 else (permuted_count + 1) / (permutations + 1)

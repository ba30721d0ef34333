"""The shared resampling engine: seeds, blocks of permuted labels, the permutation p-value.

Permutations come from one counter-based generator implemented identically in all three backends
(``permutations`` kernel; definition in ``src/permute.rs``): permutation p of the labels is a
Fisher–Yates shuffle driven by SplitMix64 evaluated at counter p·n + i under a key derived from the seed.
Each permutation depends only on (seed, p), so the compiled backend makes them in parallel — drawing
them one by one from numpy's generator cost more than the whole PERMANOVA kernel — and every backend
gives bit-identical permutations, hence identical p-values, for the same seed. Work proceeds in blocks
of permutations so memory is bounded by the block, not by the number of permutations.

(The bootstrap draws its indices from ``numpy.random.default_rng(seed)`` in ``scipy.stats.bootstrap``'s
order instead, so that its distribution equals scipy's; that is a few hundred thousand draws.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import numpy as np

from stats_core.errors import InvalidInputError
from stats_core.results import PermutationTestResult

# Label cells (permutations × n) generated per block: 16 MiB of int32.
BLOCK_CELLS = 1 << 22
# Permutations the compiled PERMANOVA kernel processes together (permanova.rs LANES).
LANES = 32
# A permuted statistic within this relative distance of the observed one counts as "at least as
# extreme" (vegan uses an absolute EPS): p-values then do not depend on a backend's summation order.
TIE_RTOL = 1e-9


def seed_value(seed: object) -> int:
    """The integer seed to use and record: ``seed`` checked, or fresh OS entropy (63 bits) when None."""
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**64:
        raise InvalidInputError("seed", f"expected a non-negative integer below 2**64 or None, got {seed!r}")
    return int(seed)


def permutation_key(seed: int) -> int:
    """The generator key of a seed: SplitMix64's first output for that seed (decorrelates nearby seeds)."""
    mask = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def permuted_label_blocks(kernels: ModuleType, codes: np.ndarray, seed: int, permutations: int) -> Iterator[np.ndarray]:
    """Blocks of (≤ block, n) int32 rows: permutations 0 … permutations−1 of ``codes`` for ``seed``."""
    n = codes.shape[0]
    block = max(1, min(permutations, BLOCK_CELLS // max(n, 1)))
    if block < permutations:
        # Whole groups of LANES: the compiled kernel pads the last group of each block to LANES lanes.
        block = max(LANES, block - block % LANES)
    key = permutation_key(seed)
    for start in range(0, permutations, block):
        yield kernels.permutations(codes, key, start, min(block, permutations - start))


def count_at_least(permuted: np.ndarray, observed: float) -> int:
    """Number of permuted statistics ≥ the observed one (ties within TIE_RTOL count)."""
    if np.isposinf(observed):
        return int(np.isposinf(permuted).sum())
    return int((permuted >= observed - TIE_RTOL * abs(observed)).sum())


def permutation_pvalue(permuted_count: int, permutations: int) -> float:
    """(k + 1) / (permutations + 1); NaN when there were no permutations."""
    return float("nan") if permutations == 0 else (permuted_count + 1) / (permutations + 1)


def permutation_test(
    method: str,
    statistic: float,
    count_block: Callable[[np.ndarray], int],
    kernels: ModuleType,
    codes: np.ndarray,
    groups: Any,
    sizes: np.ndarray,
    seed: int,
    permutations: int,
    **extra: Any,
) -> PermutationTestResult:
    """Sum ``count_block`` (permuted statistics at least as extreme) over relabelling blocks → the result."""
    k = sum(count_block(block) for block in permuted_label_blocks(kernels, codes, seed, permutations))
    return PermutationTestResult(
        method=method,
        statistic=statistic,
        pvalue=permutation_pvalue(k, permutations),
        permutations=permutations,
        n=int(codes.shape[0]),
        groups=groups,
        group_sizes=tuple(int(s) for s in sizes),
        seed=seed,
        **extra,
    )

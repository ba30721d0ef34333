"""The shared resampling engine: seeds, blocks of permuted labels, the permutation p-value.

Permutations come from one counter-based generator implemented identically in all three backends
(``permutations`` kernel; definition in ``src/permute.rs``): permutation p of the labels is a
Fisher–Yates shuffle driven by SplitMix64 evaluated at counter p·n + i under a key derived from the seed.
Each permutation depends only on (seed, p), so the compiled backend makes them in parallel — drawing
them one by one from numpy's generator cost more than the whole PERMANOVA kernel — and every backend
gives bit-identical permutations, hence identical p-values, for the same seed. Work proceeds in blocks
of permutations so memory is bounded by the block, not by the number of permutations.

(The bootstrap draws its indices from ``numpy.random.default_rng(SeedSequence(seed))`` in
``scipy.stats.bootstrap``'s order instead — ``stats_core.bootstrap_indices``, shared by
``bootstrap_kendall_tau`` and hofcat's analysis — so that its distribution equals scipy's; that is a few
hundred thousand draws.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from stats_core import _validate
from stats_core._backend import kernels as backend_kernels
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


@dataclass(frozen=True)
class Design:
    """A checked one-way design on a distance matrix, as PERMANOVA and PERMDISP both start from it."""

    distances: np.ndarray  # condensed or square, as given (finite/non-negative: see ``design``)
    n: int
    codes: np.ndarray  # (n,) int32 group codes
    groups: tuple
    sizes: np.ndarray
    inverse_sizes: np.ndarray  # 1/n_g, float64
    permutations: int
    seed: int  # the seed used (drawn from the OS when None was given)
    kernels: ModuleType


def design(
    distances: object, grouping: object, permutations: object, seed: object, backend: str, *, min_size: int = 1
) -> Design:
    """Check the arguments of a permutation test on distances and pick the backend → ``Design``.

    The finite/non-negative check of a condensed matrix is left to the caller's first kernel pass (which
    reports it; ``_validate.condensed_values_check`` then names the bad value).
    """
    dist, n = _validate.distances("distances", distances, condensed_values=False)
    codes, groups, sizes = _validate.grouping("grouping", grouping, n, min_size=min_size)
    count = _validate.int_at_least("permutations", permutations, 0)
    return Design(
        dist, n, codes, groups, sizes, 1.0 / sizes.astype(np.float64), count, seed_value(seed), backend_kernels(backend)
    )


def permutation_test(
    method: str, statistic: float, count_block: Callable[[np.ndarray], int], design: Design, **extra: Any
) -> PermutationTestResult:
    """Sum ``count_block`` (permuted statistics at least as extreme) over relabelling blocks → the result."""
    blocks = permuted_label_blocks(design.kernels, design.codes, design.seed, design.permutations)
    k = sum(count_block(block) for block in blocks)
    return PermutationTestResult(
        method=method,
        statistic=statistic,
        pvalue=permutation_pvalue(k, design.permutations),
        permutations=design.permutations,
        n=design.n,
        groups=design.groups,
        group_sizes=tuple(int(s) for s in design.sizes),
        seed=design.seed,
        **extra,
    )

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

Exact p-values. Where every distinct relabelling of the labels (within strata) besides the observed one fits in
the permutations asked for, the test visits each exactly once instead of drawing
(``relabellings``; permute's complete enumeration below ``minperm``, with the permutations asked for as the
threshold, so enumeration never costs more than the draws would have; the strata's tables of arrangements,
which are held, must fit in ``BLOCK_CELLS`` labels, so memory stays bounded as with draws). Equal labels give the
same relabelling, so each distinct assignment counts once; under the null every distinct assignment is equally
likely (each is reached by the same number of permutations of the objects), and p = (k + 1) / N is the exact
proportion of all N distinct relabellings, the observed one included, whose statistic is at least the observed.
The enumerated rows go to the same counting kernels as drawn ones, so every backend gives the same count.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

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


@dataclass(frozen=True)
class Strata:
    """Blocks that permutations stay inside (vegan's ``strata``, permute's ``how(blocks = …)``)."""

    labels: tuple  # sorted distinct stratum labels
    order: np.ndarray  # (n,) int64: object indices stratum after stratum (stable: ascending within a stratum)
    starts: np.ndarray  # (strata + 1,) int64: stratum s is order[starts[s]:starts[s + 1]]


def strata_layout(value: object, n: int) -> Strata | None:
    """``strata`` labels of n objects checked and laid out for the blocked generator; None when None."""
    if value is None:
        return None
    codes, labels, sizes = _validate.grouping("strata", value, n, min_groups=1)
    order = np.argsort(codes, kind="stable").astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return Strata(labels, order, starts)


def _arrangements(counts: tuple[int, ...]) -> np.ndarray:
    """Every distinct sequence holding counts[k] copies of k: (N, Σ counts) int32, N the multinomial coefficient.

    Label by label, each partial row's free positions are filled in every way (``itertools.combinations``); the
    last label takes what is left. Loops over labels, not positions, so a long stratum costs no recursion.
    """
    size = sum(counts)
    rows = np.full((1, size), len(counts) - 1, np.int32)
    free = np.arange(size)[None, :]  # (rows, free positions) of each partial row
    for label, count in enumerate(counts[:-1]):
        width = free.shape[1]
        picks = np.array(list(itertools.combinations(range(width), count)), np.intp).reshape(-1, count)
        rows = np.repeat(rows, len(picks), axis=0)
        chosen = free[:, picks].reshape(len(rows), count)
        rows[np.arange(len(rows))[:, None], chosen] = label
        left = np.ones((len(picks), width), bool)
        left[np.arange(len(picks))[:, None], picks] = False
        free = free[:, np.nonzero(left)[1].reshape(len(picks), width - count)].reshape(len(rows), width - count)
    return rows


@dataclass(frozen=True)
class Enumeration:
    """Every distinct relabelling of a design's labels within its strata, the observed one set aside.

    Relabelling r gives stratum s's members row ``arrangements[s][digit_s]``, (digit_s) the mixed-radix
    digits of r over the strata's arrangement counts; ``observed`` is the index of the observed labelling.
    """

    members: tuple[np.ndarray, ...]  # per stratum: its object indices
    arrangements: tuple[np.ndarray, ...]  # per stratum: (count_s, size_s) int32, its distinct label arrangements
    observed: int

    @property
    def others(self) -> int:
        """Number of distinct relabellings besides the observed one."""
        return math.prod(a.shape[0] for a in self.arrangements) - 1

    def rows(self, first: int, stop: int) -> np.ndarray:
        """Relabellings first … stop−1 of the others (0 ≤ first ≤ stop ≤ ``others``): (stop − first, n) int32."""
        index = np.arange(first, stop, dtype=np.int64)
        index += index >= self.observed
        digits = np.unravel_index(index, tuple(a.shape[0] for a in self.arrangements))
        out = np.empty((stop - first, sum(m.shape[0] for m in self.members)), np.int32)
        for members, arrangements, digit in zip(self.members, self.arrangements, digits, strict=True):
            out[:, members] = arrangements[digit]
        return out


def _members(n: int, blocks: Strata | None) -> tuple[np.ndarray, ...]:
    """Per stratum of ``blocks`` (one stratum when None), the indices of its objects among n."""
    order = blocks.order if blocks is not None else np.arange(n)
    starts = blocks.starts if blocks is not None else np.array([0, n])
    return tuple(order[starts[b] : starts[b + 1]] for b in range(len(starts) - 1))


def log_relabellings(labels: object, strata: object = None) -> float:
    """Natural log of the number of distinct relabellings of ``labels`` (n) moving only within ``strata`` (n block
    labels, None: one block): Σ over blocks of log(n_s! / Π_k n_{s,k}!), from log-gamma sums (no huge integers)."""
    try:
        n = len(labels)  # type: ignore[arg-type]
    except TypeError:
        raise InvalidInputError("labels", f"expected a sequence of labels, got {type(labels).__name__}") from None
    codes, _, _ = _validate.grouping("labels", labels, n, min_groups=1)
    return _log_relabellings(codes, strata_layout(strata, n))


def _log_relabellings(codes: np.ndarray, blocks: Strata | None) -> float:
    """``log_relabellings`` of checked codes (n,) within laid-out ``blocks``."""
    total = 0.0
    for members in _members(codes.shape[0], blocks):
        _, sizes = np.unique(codes[members], return_counts=True)
        total += math.lgamma(len(members) + 1) - sum(math.lgamma(c + 1) for c in sizes.tolist())
    return total


def enumeration(codes: np.ndarray, blocks: Strata | None, limit: int) -> Enumeration | None:
    """Every distinct relabelling of ``codes`` (n,) within ``blocks``; None when more than ``limit`` besides the
    observed one (as permute's ``minperm``: enumerate when all fit) or when the strata's tables of arrangements
    would hold more than ``BLOCK_CELLS`` labels."""
    # log of the count first: n! of a large design is a huge integer, and the answer there is always "too many"
    if _log_relabellings(codes, blocks) > math.log(limit + 1) + 1e-9:
        return None
    members = _members(codes.shape[0], blocks)
    counts = [np.unique(codes[m], return_counts=True) for m in members]
    # multinomial coefficients as products of binomials (no factorial of a long stratum)
    per_stratum = [
        math.prod(math.comb(int(c), int(k)) for c, k in zip(np.cumsum(z), z, strict=True)) for _, z in counts
    ]
    table = sum(a * len(m) for a, m in zip(per_stratum, members, strict=True))
    if math.prod(per_stratum) - 1 > limit or table > BLOCK_CELLS:
        return None
    arrangements = tuple(values[_arrangements(tuple(int(c) for c in sizes))] for values, sizes in counts)
    digits = [
        int(np.flatnonzero((a == codes[m][None, :]).all(axis=1))[0]) for m, a in zip(members, arrangements, strict=True)
    ]
    observed = int(np.ravel_multi_index(digits, [a.shape[0] for a in arrangements])) if digits else 0
    return Enumeration(members, tuple(a.astype(np.int32) for a in arrangements), observed)


def relabellings(codes: np.ndarray, permutations: int, blocks: Strata | None) -> tuple[int, Enumeration | None]:
    """(relabellings to count, the enumeration of all of them or None): every distinct relabelling but the
    observed one when they number at most ``permutations`` (and their tables fit: ``enumeration``), which makes
    p exact; else ``permutations`` drawn ones. One rule for every permutation test in stats_core."""
    every = enumeration(codes, blocks, permutations) if permutations else None
    return (permutations, None) if every is None else (every.others, every)


def permuted_label_blocks(
    kernels: ModuleType,
    codes: np.ndarray,
    seed: int,
    permutations: int,
    blocks: Strata | None = None,
    *,
    first: int = 0,
    every: Enumeration | None = None,
) -> Iterator[np.ndarray]:
    """Blocks of (≤ block, n) int32 rows: permutations ``first`` … permutations−1 of ``codes`` for ``seed``.

    With ``blocks``, labels move only within strata (``permutations_within``); one stratum gives exactly the
    unblocked rows. Permutation p is the same row whatever ``first`` is (the generator is counter-based).
    With ``every`` (``relabellings``), the rows are those enumerated relabellings instead (seed unused).
    """
    n = codes.shape[0]
    block = max(1, min(permutations - first, BLOCK_CELLS // max(n, 1)))
    if block < permutations - first:
        # Whole groups of LANES: the compiled kernel pads the last group of each block to LANES lanes.
        block = max(LANES, block - block % LANES)
    key = permutation_key(seed)
    for start in range(first, permutations, block):
        count = min(block, permutations - start)
        if every is not None:
            yield every.rows(start, start + count)
        elif blocks is None:
            yield kernels.permutations(codes, key, start, count)
        else:
            yield kernels.permutations_within(codes, blocks.order, blocks.starts, key, start, count)


def count_at_least(permuted: np.ndarray, observed: float) -> int:
    """Number of permuted statistics ≥ the observed one (ties within TIE_RTOL count)."""
    if np.isposinf(observed):
        return int(np.isposinf(permuted).sum())
    return int((permuted >= observed - TIE_RTOL * abs(observed)).sum())


def permutation_pvalue(permuted_count: int, permutations: int, exact: bool = False) -> float:
    """(k + 1) / (permutations + 1); NaN when no permutation was drawn. ``exact``: the permutations were every
    distinct relabelling but the observed one, so this is the exact p (1 where the observed is the only one)."""
    return float("nan") if permutations == 0 and not exact else (permuted_count + 1) / (permutations + 1)


@dataclass(frozen=True)
class Design:
    """A checked one-way design on a distance matrix, as PERMANOVA and PERMDISP both start from it."""

    distances: np.ndarray  # condensed or square, as given (finite/non-negative: see ``design``)
    n: int
    codes: np.ndarray  # (n,) int32 group codes
    groups: tuple
    sizes: np.ndarray
    inverse_sizes: np.ndarray  # 1/n_g, float64
    permutations: int  # relabellings counted: those drawn, or with ``every`` every distinct one but the observed
    seed: int  # the seed used (drawn from the OS when None was given)
    kernels: ModuleType
    strata: Strata | None = None  # permutations stay within these blocks; None: free permutations
    every: Enumeration | None = None  # all distinct relabellings, when they fit in the permutations asked for


def design(
    distances: object,
    grouping: object,
    permutations: object,
    seed: object,
    backend: str,
    *,
    min_size: int = 1,
    strata: object = None,
) -> Design:
    """Check the arguments of a permutation test on distances (``strata``: n block labels or None) → ``Design``.

    The finite/non-negative check of a condensed matrix is left to the caller's first kernel pass (which
    reports it; ``_validate.condensed_values_check`` then names the bad value).
    """
    dist, n = _validate.distances("distances", distances, condensed_values=False)
    codes, groups, sizes = _validate.grouping("grouping", grouping, n, min_size=min_size)
    count = _validate.int_at_least("permutations", permutations, 0)
    blocks = strata_layout(strata, n)
    count, every = relabellings(codes, count, blocks)
    return Design(
        dist,
        n,
        codes,
        groups,
        sizes,
        1.0 / sizes.astype(np.float64),
        count,
        seed_value(seed),
        backend_kernels(backend),
        blocks,
        every,
    )


class Distributor(Protocol):
    """Runs the resampling of one call elsewhere (``stats_core.distributed``): same draws, same result."""

    def count(self, count_block: Callable[[np.ndarray], int], design: Design) -> int:
        """``count_range`` over 0 … design.permutations, split into ranges run elsewhere and summed."""
        ...

    def resamples(
        self, kernel: Callable[..., np.ndarray], x: np.ndarray, ref: np.ndarray, indices: np.ndarray
    ) -> np.ndarray:
        """``kernel(x, ref, indices)`` with the resamples (indices' axis 1) split into ranges, stacked on axis 0."""
        ...


# Where resampling runs: None in this process; ``stats_core.distributed.on_ray`` sets a Ray distributor for
# the calls inside its ``with`` block (a ContextVar, so concurrent threads and tasks keep their own).
DISTRIBUTOR: ContextVar[Distributor | None] = ContextVar("stats_core_distributor", default=None)


def count_range(count_block: Callable[[np.ndarray], int], design: Design, first: int, stop: int) -> int:
    """Sum of ``count_block`` over the relabelling blocks of permutations first … stop−1 of ``design``."""
    blocks = permuted_label_blocks(
        design.kernels, design.codes, design.seed, stop, design.strata, first=first, every=design.every
    )
    return sum(count_block(block) for block in blocks)


def over_resamples(
    kernel: Callable[..., np.ndarray], x: np.ndarray, ref: np.ndarray, indices: np.ndarray
) -> np.ndarray:
    """``kernel(x, ref, indices)`` here, or through the active distributor (bit-identical either way)."""
    spread = DISTRIBUTOR.get()
    return kernel(x, ref, indices) if spread is None else spread.resamples(kernel, x, ref, indices)


def permutation_test(
    method: str, statistic: float, count_block: Callable[[np.ndarray], int], design: Design, **extra: Any
) -> PermutationTestResult:
    """Sum ``count_block`` (permuted statistics at least as extreme) over relabelling blocks → the result."""
    spread = DISTRIBUTOR.get()
    if spread is None:
        k = count_range(count_block, design, 0, design.permutations)
    else:
        k = spread.count(count_block, design)
    return PermutationTestResult(
        method=method,
        statistic=statistic,
        pvalue=permutation_pvalue(k, design.permutations, design.every is not None),
        permutations=design.permutations,
        n=design.n,
        groups=design.groups,
        group_sizes=tuple(int(s) for s in design.sizes),
        seed=design.seed,
        strata=design.strata.labels if design.strata is not None else None,
        exact=design.every is not None,
        **extra,
    )

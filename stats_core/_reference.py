"""Plain numpy reference kernels: short, obviously correct, used to check the fast backends.

Every backend module (``_native``, ``_numba``, this one) exposes the same kernel functions with the same
signatures; ``stats_core/_backend.py`` picks one.
"""

from __future__ import annotations

import numpy as np

from stats_core._reference_terms import cell_column_quanta as cell_column_quanta  # kernels of this backend
from stats_core._reference_terms import cell_factor_sums as cell_factor_sums
from stats_core._reference_terms import cell_forms as cell_forms
from stats_core._reference_terms import cell_pair_sums as cell_pair_sums

PAIRWISE_MAX = 128  # rows up to this long count pair by pair; longer ones by Knight's method (same counts)


def kendall_tau_b_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Tau-b of each row pair of two (rows, n) float64 arrays → (rows,); NaN where a side is constant."""
    if x.shape[1] <= PAIRWISE_MAX:
        score, not_tied_x, not_tied_y = _counts_pairwise(x, y)
    else:
        counts = [_counts_sorted(a, b) for a, b in zip(x, y, strict=True)]
        score, not_tied_x, not_tied_y = np.array(counts, dtype=np.int64).reshape(-1, 3).T
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = score / np.sqrt(not_tied_x.astype(np.float64) * not_tied_y)
    return np.clip(tau, -1.0, 1.0)


def _counts_pairwise(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(C − D, pairs not tied in x, pairs not tied in y) per row, from every pair's signs (rows in chunks)."""
    n = x.shape[1]
    upper = np.triu(np.ones(n, dtype=bool), k=1)
    parts = []
    step = max(1, 4_000_000 // max(1, n * n))
    for r in range(0, x.shape[0], step):
        dx = np.sign(x[r : r + step, :, None] - x[r : r + step, None, :])[:, upper]
        dy = np.sign(y[r : r + step, :, None] - y[r : r + step, None, :])[:, upper]
        parts.append(np.stack([(dx * dy).sum(axis=1), (dx != 0).sum(axis=1), (dy != 0).sum(axis=1)]).astype(np.int64))
    score, not_tied_x, not_tied_y = np.concatenate(parts, axis=1) if parts else np.zeros((3, 0), np.int64)
    return score, not_tied_x, not_tied_y


def _tied_pairs(same_as_previous: np.ndarray) -> int:
    """Σ over runs of t(t − 1)/2, the runs given by whether each element equals the one before."""
    runs = np.bincount(np.cumsum(np.concatenate([[True], ~same_as_previous])))
    return int((runs * (runs - 1) // 2).sum())


def _counts_sorted(x: np.ndarray, y: np.ndarray) -> tuple[int, int, int]:
    """Knight's counts of one pair of vectors: C − D = n0 − n1 − n2 + n3 − 2D, D the inversions of y in (x, y) order."""
    x, y = x + 0.0, y + 0.0  # −0.0 becomes 0.0
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    same_x = xs[1:] == xs[:-1]
    tied_x = _tied_pairs(same_x)
    tied_both = _tied_pairs(same_x & (ys[1:] == ys[:-1]))
    ranks = np.unique(ys, return_inverse=True)[1].astype(np.int64)
    per_value = np.bincount(ranks)
    tied_y = int((per_value * (per_value - 1) // 2).sum())
    n = x.shape[0]
    n0 = n * (n - 1) // 2
    return n0 - tied_x - tied_y + tied_both - 2 * _inversions(ranks), n0 - tied_x, n0 - tied_y


def _inversions(ranks: np.ndarray) -> int:
    """Pairs i < j with ranks[i] > ranks[j]: bottom-up merge passes, each one stable argsort.

    Before the pass of width w, every block of w is sorted. Merging blocks L, R by a stable sort on (block, rank),
    an element of R at offset p of the merged block and offset q of R has p − q elements of L ≤ it before it, so
    len(L) − (p − q) elements of L above it.
    """
    n = ranks.shape[0]
    levels = int(ranks.max()) + 1 if n else 1
    v, position, total, width = ranks, np.arange(n), 0, 1
    while width < n:
        start = position // (2 * width) * (2 * width)
        came = np.argsort(start * levels + v, kind="stable")
        offset = came - start
        right = offset >= width
        left_len = np.minimum(width, n - start)
        total += int((left_len - (position - start - (offset - width)))[right].sum())
        v = v[came]
        width *= 2
    return total


def _rows(distances: np.ndarray, n: int):
    """(i, distances from i to i+1 … n−1) for a condensed or square matrix, without copying."""
    offset = 0
    for i in range(n - 1):
        if distances.ndim == 1:
            yield i, distances[offset : offset + n - i - 1]
            offset += n - i - 1
        else:
            yield i, distances[i, i + 1 :]


def _size(distances: np.ndarray) -> int:
    """n of a condensed or square matrix."""
    if distances.ndim == 2:
        return distances.shape[0]
    return int(round((1.0 + np.sqrt(1.0 + 8.0 * distances.shape[0])) / 2.0))


def pdist(x: np.ndarray, metric: str) -> np.ndarray:
    """Condensed distances between the rows of x (n, k) float64 for one of distance.METRICS."""
    n = x.shape[0]
    parts = []
    for i in range(n - 1):
        u, v = x[i], x[i + 1 :]
        diff = v - u
        if metric == "euclidean":
            parts.append(np.sqrt((diff * diff).sum(axis=1)))
        elif metric == "sqeuclidean":
            parts.append((diff * diff).sum(axis=1))
        elif metric == "cityblock":
            parts.append(np.abs(diff).sum(axis=1))
        elif metric == "chebyshev":
            parts.append(np.abs(diff).max(axis=1))
        elif metric == "braycurtis":
            parts.append(np.abs(diff).sum(axis=1) / np.abs(v + u).sum(axis=1))
        elif metric == "cosine":
            parts.append(np.clip(1.0 - (v @ u) / (np.sqrt((v * v).sum(axis=1)) * np.sqrt(u @ u)), 0.0, 2.0))
        else:
            raise ValueError(f"unknown metric {metric!r}")
    return np.concatenate(parts) if parts else np.empty(0)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW32 = np.uint64(0xFFFFFFFF)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function on uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _mul_high(x: np.ndarray, m: int) -> np.ndarray:
    """floor(x · m / 2⁶⁴) for m < 2³², in 64-bit limbs."""
    m = np.uint64(m)
    return ((x >> np.uint64(32)) * m + (((x & _LOW32) * m) >> np.uint64(32))) >> np.uint64(32)


def permutations(codes: np.ndarray, key: int, first: int, count: int) -> np.ndarray:
    """Rows first … first+count−1 of the counter-based permutation sequence of codes (see src/permute.rs)."""
    n = codes.shape[0]
    return permutations_within(codes, np.arange(n), np.array([0, n]), key, first, count)  # one stratum: the same rows


def permutations_within(
    codes: np.ndarray, order: np.ndarray, starts: np.ndarray, key: int, first: int, count: int
) -> np.ndarray:
    """Rows first … first+count−1 of the blocked permutation sequence: shuffles only within strata.

    ``order`` (n,) lists the objects stratum after stratum, stratum s at ``order[starts[s]:starts[s + 1]]``;
    its shuffle draws at counter p·n + starts[s] + i (see src/permute.rs).
    """
    n = codes.shape[0]
    out = np.tile(codes.astype(np.int32), (count, 1))
    base = np.arange(first, first + count, dtype=np.uint64) * np.uint64(n)
    rows = np.arange(count)
    for s in range(starts.shape[0] - 1):
        lo, positions = int(starts[s]), order[starts[s] : starts[s + 1]]
        for i in range(positions.shape[0] - 1, 0, -1):
            x = _mix(np.uint64(key) + (base + np.uint64(lo + i)) * _GOLDEN)
            a, b = positions[i], positions[_mul_high(x, i + 1).astype(np.intp)]
            held = out[rows, a].copy()
            out[rows, a] = out[rows, b]
            out[rows, b] = held
    return out


def permanova_within(distances: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray) -> np.ndarray:
    """SS_W = Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij for each row of labels (P, n) int32 → (P,)."""
    out = np.zeros(labels.shape[0])
    for i, row in _rows(distances, labels.shape[1]):
        same = labels[:, i + 1 :] == labels[:, i : i + 1]
        out += (same * (row * row)).sum(axis=1) * inverse_sizes[labels[:, i]]
    return out


def permanova_observed(
    distances: np.ndarray, codes: np.ndarray, inverse_sizes: np.ndarray
) -> tuple[float, float, float, np.ndarray, bool]:
    """One pass: (SS_W of codes (n,) int32, Σ_{i<j} d²_ij, max d²_ij, Σ_j d²_ij per object (n,), all d finite, >= 0)."""
    within = total = largest = 0.0
    row_sums = np.zeros(codes.shape[0])
    valid = True
    for i, row in _rows(distances, codes.shape[0]):
        valid &= bool(np.all((row >= 0.0) & (row <= np.finfo(np.float64).max)))
        squares = row * row
        total += float(squares.sum())
        largest = max(largest, float(squares.max(initial=0.0)))
        row_sums[i] += squares.sum()
        row_sums[i + 1 :] += squares
        within += float(squares[codes[i + 1 :] == codes[i]].sum()) * inverse_sizes[codes[i]]
    return within, total, largest, row_sums, valid


def permanova_quantized(
    distances: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray, scale: float
) -> np.ndarray:
    """Screened SS_W of each label row (P, n): Σ_g (1/n_g) Σ_{i<j ∈ g} round(d²_ij · scale) / scale → (P,)."""
    out = np.zeros(labels.shape[0])
    for i, row in _rows(distances, labels.shape[1]):
        q = np.rint(row * row * scale).astype(np.int64)
        same = labels[:, i + 1 :] == labels[:, i : i + 1]
        out += (same @ q) * inverse_sizes[labels[:, i]]
    return out / scale


def permanova_factored(factor: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray) -> np.ndarray:
    """Σ_g (1/n_g) ‖Σ_{i∈g} y_i‖² for each label row (P, n) of the factor Y (n, k) → (P,)."""
    out = np.zeros(labels.shape[0])
    for c, w in enumerate(inverse_sizes):
        sums = (labels == c).astype(np.float64) @ factor
        out += w * (sums * sums).sum(axis=1)
    return out


def gower_residual(distances: np.ndarray, factor: np.ndarray, means: np.ndarray, grand: float) -> float:
    """max_{i<j} |G_ij − y_i·y_j|, G_ij = −½(d²_ij − m_i − m_j + grand); NaN if the factor or means are not finite."""
    if not (np.isfinite(factor).all() and np.isfinite(means).all() and np.isfinite(grand)):
        return float("nan")
    worst = 0.0
    for i, row in _rows(distances, factor.shape[0]):
        g = -0.5 * (row * row - means[i] - means[i + 1 :] + grand)
        worst = max(worst, float(np.abs(g - factor[i + 1 :] @ factor[i]).max(initial=0.0)))
    return worst


def group_row_sums(distances: np.ndarray, codes: np.ndarray, n_groups: int, squared: bool) -> tuple[np.ndarray, bool]:
    """(n, g): Σ_{j in group h, j≠i} d_ij (or d²_ij when squared) for every object i; and all d finite and >= 0."""
    n = codes.shape[0]
    out = np.zeros((n, n_groups))
    valid = True
    for i, row in _rows(distances, n):
        valid &= bool(np.all((row >= 0.0) & (row <= np.finfo(np.float64).max)))
        values = row * row if squared else row
        out[i] += np.bincount(codes[i + 1 :], weights=values, minlength=n_groups)
        np.add.at(out, (np.arange(i + 1, n), codes[i]), values)
    return out, valid


def group_f(values: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray) -> np.ndarray:
    """One-way ANOVA F of values (n,) for each grouping row of labels (P, n) → (P,)."""
    g = inverse_sizes.shape[0]
    n = values.shape[0]
    out = np.empty(labels.shape[0])
    for p in range(labels.shape[0]):
        means = np.bincount(labels[p], weights=values, minlength=g) * inverse_sizes
        resid = values - means[labels[p]]
        ss_within = float((resid * resid).sum())
        centred = means - values.mean()
        ss_between = float(((centred * centred) / inverse_sizes).sum())
        with np.errstate(divide="ignore", invalid="ignore"):  # numpy floats: 0 within → inf/NaN, not an exception
            out[p] = np.float64(ss_between / (g - 1)) / np.float64(ss_within / (n - g))
    return out


def bootstrap_kendall(samples: np.ndarray, reference: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Tau-b (B, G, D) of resampled country means vs reference; samples (G, C, D, U), indices (C, B, K) int32."""
    groups, countries, dims, _ = samples.shape
    b, k = indices.shape[1], indices.shape[2]
    means = np.empty((b, groups, dims, countries))
    for c in range(countries):
        picked = samples[:, c][:, :, indices[c]]  # (G, D, B, K)
        total = picked[..., 0].copy()
        for u in range(1, k):
            total += picked[..., u]
        means[..., c] = np.moveaxis(total / k, -1, 0)
    refs = np.broadcast_to(np.swapaxes(reference, 1, 2)[None], means.shape)
    tau = kendall_tau_b_rows(means.reshape(-1, countries), np.ascontiguousarray(refs).reshape(-1, countries))
    return tau.reshape(b, groups, dims)


def cluster_spread(x: np.ndarray, codes: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Centroids (g, k) and mean Euclidean distance of each cluster's points to its centroid (g,)."""
    sizes = np.bincount(codes, minlength=n_groups).astype(np.float64)
    centroids = np.zeros((n_groups, x.shape[1]))
    np.add.at(centroids, codes, x)
    centroids /= sizes[:, None]
    dist = np.sqrt(((x - centroids[codes]) ** 2).sum(axis=1))
    return centroids, np.bincount(codes, weights=dist, minlength=n_groups) / sizes

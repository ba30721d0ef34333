"""numba kernels: the fallback when the compiled extension is missing; same signatures as ``_reference``."""

from __future__ import annotations

import numba
import numpy as np

from stats_core._numba_kendall import kendall_tau_b_rows as kendall_tau_b_rows  # a kernel of this backend
from stats_core._numba_kendall import tau_b
from stats_core._numba_terms import cell_column_quanta as cell_column_quanta  # kernels of this backend
from stats_core._numba_terms import cell_factor_sums as cell_factor_sums
from stats_core._numba_terms import cell_forms as cell_forms
from stats_core._numba_terms import cell_pair_sums as cell_pair_sums


@numba.njit(inline="always")
def _mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def permutations(codes: np.ndarray, key: int, first: int, count: int) -> np.ndarray:
    """Rows first … first+count−1 of the counter-based permutation sequence of codes (see src/permute.rs)."""
    n = codes.shape[0]
    return permutations_within(codes, np.arange(n), np.array([0, n]), key, first, count)  # one stratum: the same rows


@numba.njit(cache=True, parallel=True, nogil=True)
def _permutations_within(codes, order, starts, key, first, count):
    # Every quantity is uint64 on purpose: numba turns uint64 (op) int64 into float64. Stratum s shuffles
    # positions order[starts[s]:starts[s + 1]]; one stratum over 0 … n−1 is the unblocked sequence.
    n = codes.shape[0]
    out = np.empty((count, n), dtype=np.int32)
    golden = np.uint64(0x9E3779B97F4A7C15)
    low = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    for r in numba.prange(count):
        row = out[r]
        for t in range(n):
            row[t] = codes[t]
        base = (np.uint64(first) + np.uint64(r)) * np.uint64(n)
        for s in range(starts.shape[0] - 1):
            lo = starts[s]
            size = starts[s + 1] - lo
            for k in range(size - 1):
                i = size - 1 - k
                x = _mix(key + (base + np.uint64(lo + i)) * golden)
                m = np.uint64(i + 1)
                j = np.int64(((x >> s32) * m + (((x & low) * m) >> s32)) >> s32)
                a = order[lo + i]
                b = order[lo + j]
                held = row[a]
                row[a] = row[b]
                row[b] = held
    return out


def permutations_within(
    codes: np.ndarray, order: np.ndarray, starts: np.ndarray, key: int, first: int, count: int
) -> np.ndarray:
    """Rows first … first+count−1 of the blocked permutation sequence (shuffles within strata; src/permute.rs)."""
    return _permutations_within(
        codes.astype(np.int32), order.astype(np.int64), starts.astype(np.int64), np.uint64(key), np.uint64(first), count
    )


@numba.njit(inline="always")
def _row_start(i: int, n: int) -> int:
    """Condensed index of pair (i, i+1)."""
    return i * n - (i * (i + 1)) // 2


@numba.njit(cache=True, parallel=True, nogil=True)
def _pdist(x: np.ndarray, metric: int) -> np.ndarray:
    n, k = x.shape
    out = np.empty(n * (n - 1) // 2)
    for i in numba.prange(n - 1):
        base = _row_start(i, n) - i - 1
        for j in range(i + 1, n):
            acc = 0.0
            acc2 = 0.0
            acc3 = 0.0
            for f in range(k):
                u = x[i, f]
                v = x[j, f]
                if metric <= 1:
                    d = u - v
                    acc += d * d
                elif metric == 2:
                    acc += abs(u - v)
                elif metric == 3:
                    acc = max(acc, abs(u - v))
                elif metric == 4:
                    acc += abs(u - v)
                    acc2 += abs(u + v)
                else:
                    acc += u * v
                    acc2 += u * u
                    acc3 += v * v
            if metric == 0:
                acc = np.sqrt(acc)
            elif metric == 4:
                acc = acc / acc2
            elif metric == 5:
                # Clamp by comparisons so a zero-norm row keeps its NaN (Python's max(0.0, nan) is 0.0).
                acc = 1.0 - acc / (np.sqrt(acc2) * np.sqrt(acc3))  # scipy's 1 − u·v / (‖u‖‖v‖)
                if acc < 0.0:
                    acc = 0.0
                elif acc > 2.0:
                    acc = 2.0
            out[base + j] = acc
    return out


# Largest finite float64: "0 <= d <= _F64_MAX" is false for negatives, NaN and inf alike.
_F64_MAX = np.finfo(np.float64).max

_METRIC_CODES = {"euclidean": 0, "sqeuclidean": 1, "cityblock": 2, "chebyshev": 3, "braycurtis": 4, "cosine": 5}


def pdist(x: np.ndarray, metric: str) -> np.ndarray:
    """Condensed distances between the rows of x (n, k) float64 for one of distance.METRICS."""
    return _pdist(x, _METRIC_CODES[metric])


@numba.njit(inline="always")
def _row(flat, square, i: int, n: int):
    """Distances from i to i+1 … n−1 of a flattened condensed or square matrix, as a view."""
    start = i * n + i + 1 if square else _row_start(i, n)
    return flat[start : start + n - i - 1]


@numba.njit(inline="always")
def _within_row(flat, square, labels_t, inverse_sizes, i, n, rsum, partial):
    """Add row i's within-group d² (weighted 1/n_g) to partial[p] for every permutation p."""
    perms = rsum.shape[0]
    for p in range(perms):
        rsum[p] = 0.0
    row = _row(flat, square, i, n)
    own = labels_t[i]
    for jj in range(row.shape[0]):
        d2 = row[jj] * row[jj]
        lab = labels_t[i + 1 + jj]
        for p in range(perms):
            if lab[p] == own[p]:
                rsum[p] += d2
    for p in range(perms):
        partial[p] += rsum[p] * inverse_sizes[own[p]]


@numba.njit(cache=True, parallel=True, nogil=True)
def _permanova_within(flat, square, labels_t, inverse_sizes):
    # Parallel over rows, row t paired with row n−2−t so every task has ~n pairs; each distance is read
    # once per block and applied to every permutation of the block (labels_t is object-major: (n, P)).
    n, perms = labels_t.shape
    rows = n - 1
    tasks = (rows + 1) // 2
    partials = np.zeros((tasks, perms))
    for t in numba.prange(tasks):
        rsum = np.empty(perms)
        _within_row(flat, square, labels_t, inverse_sizes, t, n, rsum, partials[t])
        if rows - 1 - t != t:
            _within_row(flat, square, labels_t, inverse_sizes, rows - 1 - t, n, rsum, partials[t])
    return partials


def permanova_within(distances: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray) -> np.ndarray:
    """SS_W = Σ_g (1/n_g) Σ_{i<j ∈ g} d²_ij for each row of labels (P, n) int32 → (P,)."""
    # The tasks' partial sums are added outside numba: inside a parallel function `.sum()` becomes a
    # per-thread reduction whose order (and last bits) would depend on the thread count.
    flat, labels_t = distances.reshape(-1), np.ascontiguousarray(labels.T)
    return _permanova_within(flat, distances.ndim == 2, labels_t, inverse_sizes).sum(axis=0)


# Tasks of the observed pass, as src/matrix.rs's REDUCTION_PARTS: a constant so the result is thread-count free.
_REDUCTION_BLOCKS = 32


@numba.njit(cache=True, parallel=True, nogil=True)
def _permanova_observed(flat, square, codes, inverse_sizes, blocks):
    # Each task takes every blocks-th row (interleaved, so tasks have similar work) and adds its rows' d²
    # to the later objects' sums in its own vector; the vectors are added at the end.
    n = codes.shape[0]
    within = np.zeros(blocks)
    total = np.zeros(blocks)
    largest = np.zeros(blocks)
    bad = np.zeros(blocks, dtype=np.bool_)
    sums = np.zeros((blocks, n))
    for b in numba.prange(blocks):
        acc = sums[b]
        w = 0.0
        everything = 0.0
        top = 0.0
        block_bad = False
        for i in range(b, n - 1, blocks):
            row = _row(flat, square, i, n)
            own = codes[i]
            same = 0.0
            row_total = 0.0
            for jj in range(row.shape[0]):
                v = row[jj]
                block_bad |= not (v >= 0.0 and v <= _F64_MAX)
                row_total += v * v
                top = max(top, v * v)
                acc[i + 1 + jj] += v * v
                if codes[i + 1 + jj] == own:
                    same += v * v
            w += same * inverse_sizes[own]
            everything += row_total
            acc[i] += row_total
        within[b] = w
        total[b] = everything
        largest[b] = top
        bad[b] = block_bad
    return within, total, largest, sums, bad


def permanova_observed(
    distances: np.ndarray, codes: np.ndarray, inverse_sizes: np.ndarray
) -> tuple[float, float, float, np.ndarray, bool]:
    """One pass: (SS_W of codes (n,) int32, Σ_{i<j} d²_ij, max d²_ij, Σ_j d²_ij per object (n,), all d finite, >= 0)."""
    # A fixed number of tasks (not the thread count): the same sums, bit for bit, on any number of threads.
    blocks = _REDUCTION_BLOCKS
    within, total, largest, row_sums, bad = _permanova_observed(
        distances.reshape(-1), distances.ndim == 2, codes, inverse_sizes, blocks
    )
    # reduced here, in block order, not by numba's thread-count-dependent parallel reductions
    return float(within.sum()), float(total.sum()), float(largest.max()), row_sums.sum(axis=0), not bool(bad.any())


@numba.njit(inline="always")
def _at(flat, square, i, j, n):
    """d_ij of a flattened condensed or square matrix (i != j)."""
    if square:
        return flat[i * n + j]
    # prange indices are unsigned; mixing them with signed ints would give float64 indices.
    lo = np.int64(min(np.int64(i), np.int64(j)))
    hi = np.int64(max(np.int64(i), np.int64(j)))
    return flat[_row_start(lo, n) + hi - lo - 1]


# Row ranges of group_row_sums, as the native kernel's (src/cluster.rs TASKS): fixed, whatever the threads.
_ROW_SUM_TASKS = 32


@numba.njit(cache=True, nogil=True)
def _balanced_row_ranges(n, parts):
    # src/matrix.rs balanced_row_ranges: rows of the upper triangle cut where the running pair count reaches
    # ceil(total / parts)
    total = max(n * max(n - 1, 0) // 2, 1)
    target = max((total + parts - 1) // parts, 1)
    bounds = [0]
    acc = 0
    for i in range(max(n - 1, 0)):
        acc += n - i - 1
        if acc >= target:
            bounds.append(i + 1)
            acc = 0
    if bounds[-1] < max(n - 1, 0):
        bounds.append(n - 1)
    return np.array(bounds, dtype=np.int64)


@numba.njit(cache=True, parallel=True, nogil=True)
def _group_row_sums(flat, square, codes, n_groups, squared):
    # The native kernel's operations in its order, so the sums are bitwise its sums: fixed row ranges; in each,
    # row i's later partners summed in 4 interleaved lanes per group, and its d_ij added to a column
    # accumulator of each later j; then, range by range, the rows' own sums and the columns added to the total.
    n = codes.shape[0]
    g = n_groups
    bounds = _balanced_row_ranges(n, _ROW_SUM_TASKS)
    tasks = bounds.shape[0] - 1
    rows = np.zeros((n, g))
    cols = np.zeros((tasks, g, n))
    bad = np.zeros(max(tasks, 1), dtype=np.bool_)
    for t in numba.prange(tasks):
        col = cols[t]
        own = np.zeros(4 * g)
        task_bad = False
        for i in range(bounds[t], bounds[t + 1]):
            ci = codes[i]
            row = _row(flat, square, i, n)
            m = row.shape[0]
            for jj in range(m):
                v = row[jj]
                task_bad |= not (v >= 0.0 and v <= _F64_MAX)
                col[ci, i + 1 + jj] += v * v if squared else v
            own[:] = 0.0
            whole = m - m % 4
            for jj in range(whole):
                v = row[jj]
                own[(jj % 4) * g + codes[i + 1 + jj]] += v * v if squared else v
            for jj in range(whole, m):
                v = row[jj]
                own[codes[i + 1 + jj]] += v * v if squared else v
            for h in range(g):
                rows[i, h] = own[h] + own[g + h] + own[2 * g + h] + own[3 * g + h]
        bad[t] = task_bad
    out = np.zeros((n, g))
    for t in range(tasks):
        for i in range(bounds[t], bounds[t + 1]):
            for h in range(g):
                out[i, h] += rows[i, h]
        for h in range(g):
            for j in range(n):
                out[j, h] += cols[t, h, j]
    return out, not bad.any()


# Columns summed in uint32 before moving to uint64: 256 values q <= 2**23 fit (src/screen.rs).
_SCREEN_COLUMNS = 256


@numba.njit(inline="always")
def _quantized_row(flat, square, labels_t, inverse_sizes, scale, i, n, seg, total, partial):
    """Row i's within-group Σ round(d² · scale) per permutation, exact in integers, weighted 1/n_g into partial."""
    perms = seg.shape[0]
    for p in range(perms):
        seg[p] = 0
        total[p] = 0
    row = _row(flat, square, i, n)
    own = labels_t[i]
    zero = np.uint32(0)
    for jj in range(row.shape[0]):
        q = np.uint32(np.rint(row[jj] * row[jj] * scale))
        lab = labels_t[i + 1 + jj]
        for p in range(perms):
            seg[p] += q if lab[p] == own[p] else zero
        if jj % _SCREEN_COLUMNS == _SCREEN_COLUMNS - 1 or jj == row.shape[0] - 1:
            for p in range(perms):
                total[p] += seg[p]
                seg[p] = 0
    for p in range(perms):
        partial[p] += np.float64(total[p]) * inverse_sizes[own[p]]


@numba.njit(cache=True, parallel=True, nogil=True)
def _permanova_quantized(flat, square, labels_t, inverse_sizes, scale):
    n, perms = labels_t.shape
    rows = n - 1
    tasks = (rows + 1) // 2
    partials = np.zeros((tasks, perms))
    for t in numba.prange(tasks):
        seg = np.empty(perms, dtype=np.uint32)
        total = np.empty(perms, dtype=np.uint64)
        _quantized_row(flat, square, labels_t, inverse_sizes, scale, t, n, seg, total, partials[t])
        if rows - 1 - t != t:
            _quantized_row(flat, square, labels_t, inverse_sizes, scale, rows - 1 - t, n, seg, total, partials[t])
    return partials


def permanova_quantized(
    distances: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray, scale: float
) -> np.ndarray:
    """Screened SS_W of each label row (P, n): Σ_g (1/n_g) Σ_{i<j ∈ g} round(d²_ij · scale) / scale → (P,)."""
    # Object-major labels in the narrowest integer type: each row streams every later object's labels.
    narrow = np.int8 if inverse_sizes.shape[0] <= 127 else np.int16 if inverse_sizes.shape[0] <= 32767 else np.int32
    labels_t = np.ascontiguousarray(labels.T.astype(narrow))
    partials = _permanova_quantized(distances.reshape(-1), distances.ndim == 2, labels_t, inverse_sizes, scale)
    return partials.sum(axis=0) / scale  # outside numba: a fixed order of additions (see permanova_within)


@numba.njit(cache=True, parallel=True, nogil=True)
def _permanova_factored(factor, labels, inverse_sizes):
    n, k = factor.shape
    g = inverse_sizes.shape[0]
    out = np.empty(labels.shape[0])
    for p in numba.prange(labels.shape[0]):
        sums = np.zeros((g, k))
        for i in range(n):
            c = labels[p, i]
            for t in range(k):
                sums[c, t] += factor[i, t]
        s = 0.0
        for c in range(g):
            norm = 0.0
            for t in range(k):
                norm += sums[c, t] * sums[c, t]
            s += inverse_sizes[c] * norm
        out[p] = s
    return out


def permanova_factored(factor: np.ndarray, labels: np.ndarray, inverse_sizes: np.ndarray) -> np.ndarray:
    """Σ_g (1/n_g) ‖Σ_{i∈g} y_i‖² for each label row (P, n) of the factor Y (n, k) → (P,)."""
    return _permanova_factored(factor, labels, inverse_sizes)


@numba.njit(inline="always")
def _residual_row(flat, square, factor, factor_t, means, grand, i, n, dots):
    """max_j>i |G_ij − y_i·y_j|: the dot products accumulate factor column by factor column (vectorizes)."""
    row = _row(flat, square, i, n)
    m = n - i - 1
    for jj in range(m):
        dots[jj] = 0.0
    for t in range(factor.shape[1]):
        a = factor[i, t]
        col = factor_t[t, i + 1 :]
        for jj in range(m):
            dots[jj] += a * col[jj]
    w = 0.0
    later = means[i + 1 :]
    for jj in range(m):
        w = max(w, abs(-0.5 * (row[jj] * row[jj] - means[i] - later[jj] + grand) - dots[jj]))
    return w


@numba.njit(cache=True, parallel=True, nogil=True)
def _gower_residual(flat, square, factor, factor_t, means, grand):
    # Row t paired with row n−2−t so every task has ~n pairs.
    n = factor.shape[0]
    rows = n - 1
    tasks = (rows + 1) // 2
    worst = np.zeros(max(tasks, 1))
    for t in numba.prange(tasks):
        dots = np.empty(n)
        w = _residual_row(flat, square, factor, factor_t, means, grand, t, n, dots)
        if rows - 1 - t != t:
            w = max(w, _residual_row(flat, square, factor, factor_t, means, grand, rows - 1 - t, n, dots))
        worst[t] = w
    return worst.max()


def gower_residual(distances: np.ndarray, factor: np.ndarray, means: np.ndarray, grand: float) -> float:
    """max_{i<j} |G_ij − y_i·y_j|, G_ij = −½(d²_ij − m_i − m_j + grand); NaN if the factor or means are not finite."""
    if not (np.isfinite(factor).all() and np.isfinite(means).all() and np.isfinite(grand)):
        return float("nan")
    return float(
        _gower_residual(
            distances.reshape(-1), distances.ndim == 2, factor, np.ascontiguousarray(factor.T), means, grand
        )
    )


def group_row_sums(distances: np.ndarray, codes: np.ndarray, n_groups: int, squared: bool) -> tuple[np.ndarray, bool]:
    """(n, g): Σ_{j in group h, j≠i} d_ij (or d²_ij when squared) for every object i; and all d finite and >= 0."""
    return _group_row_sums(distances.reshape(-1), distances.ndim == 2, codes, n_groups, squared)


@numba.njit(cache=True, parallel=True, nogil=True)
def group_f(values, labels, inverse_sizes):
    """One-way ANOVA F of values (n,) for each grouping row of labels (P, n) → (P,)."""
    g = inverse_sizes.shape[0]
    n = values.shape[0]
    # a sequential sum, in the native kernel's order: `values.sum()` would be a thread-count-dependent reduction
    mean = 0.0
    for i in range(n):
        mean += values[i]
    mean /= n
    out = np.empty(labels.shape[0])
    for p in numba.prange(labels.shape[0]):
        means = np.zeros(g)
        for i in range(n):
            means[labels[p, i]] += values[i]
        for h in range(g):
            means[h] *= inverse_sizes[h]
        ss_within = 0.0
        for i in range(n):
            r = values[i] - means[labels[p, i]]
            ss_within += r * r
        ss_between = 0.0
        for h in range(g):
            c = means[h] - mean
            ss_between += c * c / inverse_sizes[h]
        out[p] = (
            (ss_between / (g - 1)) / (ss_within / (n - g)) if ss_within > 0 else (np.inf if ss_between > 0 else np.nan)
        )
    return out


@numba.njit(cache=True, parallel=True, nogil=True)
def bootstrap_kendall(samples, reference, indices):
    """Tau-b (B, G, D) of resampled country means vs reference; samples (G, C, D, U), indices (C, B, K) int32."""
    groups, countries, dims, _ = samples.shape
    b, k = indices.shape[1], indices.shape[2]
    out = np.empty((b, groups, dims))
    for r in numba.prange(b):
        means = np.empty(countries)
        for g in range(groups):
            for d in range(dims):
                for c in range(countries):
                    total = samples[g, c, d, indices[c, r, 0]]
                    for u in range(1, k):
                        total += samples[g, c, d, indices[c, r, u]]
                    means[c] = total / k
                out[r, g, d] = tau_b(means, reference[g, :, d])
    return out


@numba.njit(cache=True, nogil=True)
def cluster_spread(x, codes, n_groups):
    """Centroids (g, k) and mean Euclidean distance of each cluster's points to its centroid (g,)."""
    n, k = x.shape
    sizes = np.zeros(n_groups)
    centroids = np.zeros((n_groups, k))
    for i in range(n):
        sizes[codes[i]] += 1.0
        for f in range(k):
            centroids[codes[i], f] += x[i, f]
    for h in range(n_groups):
        for f in range(k):
            centroids[h, f] /= sizes[h]
    spread = np.zeros(n_groups)
    for i in range(n):
        acc = 0.0
        for f in range(k):
            dlt = x[i, f] - centroids[codes[i], f]
            acc += dlt * dlt
        spread[codes[i]] += np.sqrt(acc)
    for h in range(n_groups):
        spread[h] /= sizes[h]
    return centroids, spread

"""numba Kendall tau-b kernels (re-exported by ``_numba``): the integer counts of ``src/kendall.rs``, the same way.

Tau-b is score / sqrt(not_tied_x · not_tied_y) of three integer counts. Rows up to ``PAIRWISE_MAX`` long count
them pair by pair, O(n²); longer ones by Knight's method, O(n log n) — both give the same integers, so the tau
(computed from them with the same float operations as the Rust kernel) is the same bit for bit.
"""

from __future__ import annotations

import numba
import numpy as np

PAIRWISE_MAX = 128  # as in src/kendall.rs; it chooses a speed, never a result
RUN = 32  # insertion-sorted runs before the merge passes


@numba.njit(cache=True, nogil=True)
def _counts_pairwise(x, y):
    score = 0
    not_tied_x = 0
    not_tied_y = 0
    n = x.shape[0]
    for i in range(n):
        xi = x[i]
        yi = y[i]
        for j in range(i + 1, n):
            sx = np.int64(xi > x[j]) - np.int64(xi < x[j])
            sy = np.int64(yi > y[j]) - np.int64(yi < y[j])
            score += sx * sy
            not_tied_x += sx * sx
            not_tied_y += sy * sy
    return score, not_tied_x, not_tied_y


@numba.njit(cache=True, nogil=True)
def _tied_pairs(v):
    """Pairs among equal neighbours of a sorted array: Σ over runs of t(t − 1)/2."""
    tied = 0
    run = 0
    for i in range(1, v.shape[0]):
        run = run + 1 if v[i] == v[i - 1] else 0
        tied += run
    return tied


@numba.njit(cache=True, nogil=True)
def _sort_counting_inversions(v):
    """Sorts ``v`` in place; returns the number of pairs i < j with v[i] > v[j]."""
    n = v.shape[0]
    inversions = 0
    for lo in range(0, n, RUN):
        hi = min(lo + RUN, n)
        for i in range(lo + 1, hi):
            held = v[i]
            j = i
            while j > lo and v[j - 1] > held:
                v[j] = v[j - 1]
                j -= 1
            v[j] = held
            inversions += i - j
    src = v
    dst = np.empty_like(v)
    width = RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            k = lo
            while i < mid and j < hi:
                if src[j] < src[i]:  # equal values take the left one: ties are not inversions
                    dst[k] = src[j]
                    inversions += mid - i
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        src, dst = dst, src
        width *= 2
    if src is not v:
        v[:] = src
    return inversions


@numba.njit(cache=True, nogil=True)
def _keys(v):
    """Order-preserving int64 keys of finite floats; −0.0 and 0.0 share the key of 0.0."""
    bits = (v + 0.0).view(np.int64)  # −0.0 + 0.0 is 0.0
    return bits ^ ((bits >> 63) & np.int64(0x7FFFFFFFFFFFFFFF))


@numba.njit(cache=True, nogil=True)
def _sort_pairs(a, b):
    """Sorts the pairs (a[i], b[i]) lexicographically in place (insertion-sorted runs, then merge passes)."""
    n = a.shape[0]
    for lo in range(0, n, RUN):
        for i in range(lo + 1, min(lo + RUN, n)):
            ha = a[i]
            hb = b[i]
            j = i
            while j > lo and (a[j - 1] > ha or (a[j - 1] == ha and b[j - 1] > hb)):
                a[j] = a[j - 1]
                b[j] = b[j - 1]
                j -= 1
            a[j] = ha
            b[j] = hb
    sa, sb = a, b
    da, db = np.empty_like(a), np.empty_like(b)
    width = RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for k in range(lo, hi):
                if j >= hi or (i < mid and (sa[i] < sa[j] or (sa[i] == sa[j] and sb[i] <= sb[j]))):
                    da[k] = sa[i]
                    db[k] = sb[i]
                    i += 1
                else:
                    da[k] = sa[j]
                    db[k] = sb[j]
                    j += 1
        sa, da = da, sa
        sb, db = db, sb
        width *= 2
    if sa is not a:
        a[:] = sa
        b[:] = sb


@numba.njit(cache=True, nogil=True)
def _counts_sorted(x, y):
    """Knight's counts: C − D = n0 − n1 − n2 + n3 − 2D, D the inversions of y in (x, y) order.

    Sorting is hand-written merge sort over integer keys: numba's own argsort and sort are several times slower.
    """
    n = x.shape[0]
    a = _keys(x)
    b = _keys(y)
    _sort_pairs(a, b)
    tied_x = _tied_pairs(a)
    tied_both = 0
    run = 0
    for i in range(1, n):
        run = run + 1 if (a[i] == a[i - 1] and b[i] == b[i - 1]) else 0
        tied_both += run
    discordant = _sort_counting_inversions(b)
    tied_y = _tied_pairs(b)
    n0 = n * (n - 1) // 2
    return n0 - tied_x - tied_y + tied_both - 2 * discordant, n0 - tied_x, n0 - tied_y


@numba.njit(cache=True, nogil=True)
def tau_b(x, y):
    """Tau-b of two equal-length float64 vectors; NaN where a side is constant."""
    if x.shape[0] <= PAIRWISE_MAX:
        score, not_tied_x, not_tied_y = _counts_pairwise(x, y)
    else:
        score, not_tied_x, not_tied_y = _counts_sorted(x, y)
    denom = np.sqrt(float(not_tied_x) * float(not_tied_y))
    if denom == 0.0:
        return np.nan
    return min(1.0, max(-1.0, score / denom))


@numba.njit(cache=True, parallel=True, nogil=True)
def kendall_tau_b_rows(x, y):
    """Tau-b of each row pair of two (rows, n) float64 arrays → (rows,); NaN where a side is constant."""
    out = np.empty(x.shape[0])
    for r in numba.prange(x.shape[0]):
        out[r] = tau_b(x[r], y[r])
    return out

"""Argument checks shared by every public function; each error names the argument."""

from __future__ import annotations

from typing import Any

import numpy as np

from stats_core.errors import InvalidInputError


def finite_array(name: str, value: object, *, min_ndim: int = 1) -> np.ndarray:
    """``value`` as a float64 array of at least ``min_ndim`` dimensions with no NaN or inf."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(name, f"cannot be read as numbers ({exc})") from None
    if arr.ndim < min_ndim:
        raise InvalidInputError(name, f"expected at least {min_ndim} dimension(s), got shape {arr.shape}")
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InvalidInputError(name, f"contains a non-finite value at index {tuple(int(i) for i in bad)}")
    return arr


# Rows checked per block, so validating an n × n matrix needs O(block · n) scratch, not O(n²).
_CHECK_BLOCK_ELEMENTS = 1 << 20


def condensed_size(name: str, length: int) -> int:
    """Number of points n whose condensed matrix has ``length`` = n(n−1)/2 entries."""
    n = int(round((1.0 + np.sqrt(1.0 + 8.0 * length)) / 2.0))
    if n * (n - 1) // 2 != length or n < 2:
        raise InvalidInputError(name, f"condensed length {length} is not n(n-1)/2 for any n >= 2")
    return n


def distances(name: str, value: object, *, condensed_values: bool = True) -> tuple[np.ndarray, int]:
    """A distance matrix, condensed (1-D) or square (2-D), checked and returned as-is (no expansion) with n.

    Checks: finite, non-negative; square ones also symmetric (to 1e-12 of the largest distance) with a zero
    diagonal. float64 C-contiguous input is used without a copy. ``condensed_values=False`` leaves the
    finite/non-negative check of a condensed matrix to a kernel that makes it in its own pass over the data
    (the caller then calls ``condensed_values_check`` when the kernel reports a bad value).
    """
    try:
        arr = np.ascontiguousarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(name, f"cannot be read as numbers ({exc})") from None
    if arr.ndim == 1:
        n = condensed_size(name, arr.shape[0])
        if condensed_values:
            condensed_values_check(name, arr)
        return arr, n
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise InvalidInputError(
            name, f"expected a condensed vector or a square n x n matrix (n >= 2), got shape {arr.shape}"
        )
    n = arr.shape[0]
    if np.any(np.diagonal(arr) != 0.0):
        i = int(np.flatnonzero(np.diagonal(arr) != 0.0)[0])
        raise InvalidInputError(name, f"diagonal must be zero, found {arr[i, i]!r} at index ({i}, {i})")
    rows = max(1, _CHECK_BLOCK_ELEMENTS // n)
    scale = 0.0
    for start in range(0, n, rows):
        block = arr[start : start + rows]
        _finite_non_negative(name, block, offset=start * n)
        scale = max(scale, float(block.max()))
    tol = 1e-12 * scale
    for start in range(0, n, rows):
        block = arr[start : start + rows]
        gap = np.abs(block - arr[:, start : start + rows].T)
        if np.any(gap > tol):
            r, c = np.unravel_index(int(np.argmax(gap)), gap.shape)
            i, j = start + r, c
            raise InvalidInputError(name, f"not symmetric: [{i}, {j}] = {arr[i, j]!r} but [{j}, {i}] = {arr[j, i]!r}")
    return arr, n


def condensed_values_check(name: str, condensed: np.ndarray) -> None:
    """Raise naming the first NaN/inf/negative entry of a condensed distance vector (blockwise, O(block) scratch)."""
    step = _CHECK_BLOCK_ELEMENTS
    for start in range(0, condensed.shape[0], step):
        _finite_non_negative(name, condensed[start : start + step], offset=start)


def _finite_non_negative(name: str, block: np.ndarray, *, offset: int) -> None:
    """Raise naming the first NaN/inf/negative entry of ``block`` (flat index counted from ``offset``)."""
    # Fast path: two SIMD reductions, no temporaries (min is NaN if any NaN, so "not >= 0" catches it).
    if block.size == 0 or (block.min() >= 0.0 and np.isfinite(block.max())):
        return
    bad = ~np.isfinite(block) | (block < 0.0)
    if bad.any():
        flat = int(np.flatnonzero(bad.ravel())[0])
        value = block.ravel()[flat]
        what = "a negative distance" if np.isfinite(value) else "a non-finite value"
        raise InvalidInputError(name, f"contains {what} ({value!r}) at flat index {offset + flat}")


def grouping(
    name: str, value: object, n: int, *, min_size: int = 1, min_groups: int = 2
) -> tuple[np.ndarray, tuple, np.ndarray]:
    """Group labels of n objects → (int32 codes 0..g−1, sorted distinct labels, group sizes); needs g >= min_groups."""
    try:
        labels = np.asarray(value)
    except ValueError as error:  # ragged: sequences among the labels
        raise InvalidInputError(name, f"labels must be scalars: {error}") from None
    if labels.ndim != 1 or labels.shape[0] != n:
        raise InvalidInputError(name, f"expected {n} labels (one per object), got shape {labels.shape}")
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        raise InvalidInputError(name, "contains NaN or inf; use a label for every object")
    _check_label_types(name, value, labels)
    try:
        groups, codes = np.unique(labels, return_inverse=True)
    except TypeError as error:  # object labels numpy cannot order (e.g. tuples beside strings)
        raise InvalidInputError(name, f"labels cannot be ordered: {error}") from None
    sizes = np.bincount(codes, minlength=groups.shape[0])
    if groups.shape[0] < min_groups:
        raise InvalidInputError(name, f"needs at least {min_groups} groups, found {groups.shape[0]}")
    if sizes.min() < min_size:
        small = groups[int(np.argmin(sizes))].item()
        raise InvalidInputError(name, f"group {small!r} has {int(sizes.min())} member(s); at least {min_size} required")
    return codes.astype(np.int32), tuple(groups.tolist()), sizes


_MISSING = ("NAType", "NaTType")  # pandas' missing values, named so stats_core need not import pandas


def _check_label_types(name: str, value: object, labels: np.ndarray) -> None:
    """Refuse missing labels and labels of several kinds: numpy would turn [1, "1"] into one group "1"."""
    if labels.dtype.kind not in "OUS" or (isinstance(value, np.ndarray) and value.dtype.kind != "O"):
        return
    # the labels as given (numpy's array has already turned 1 into "1" beside a string)
    given: Any = value.to_list() if hasattr(value, "to_list") else value  # type: ignore[attr-defined]
    items = list(labels.tolist() if labels.dtype.kind == "O" else given)
    if any(v is None or type(v).__name__ in _MISSING or (isinstance(v, float) and not np.isfinite(v)) for v in items):
        raise InvalidInputError(name, "contains a missing label (None or NaN); give every object one")
    kinds = {
        "text"
        if isinstance(v, (str, bytes))
        else "number"
        if isinstance(v, (int, float, np.number))
        else type(v).__name__
        for v in items
    }
    if len(kinds) > 1:
        raise InvalidInputError(name, f"mixes labels of kinds {sorted(kinds)}; give every label the same kind")


def int_at_least(name: str, value: object, minimum: int) -> int:
    """``value`` as an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InvalidInputError(name, f"expected an integer >= {minimum}, got {value!r}")
    return int(value)

"""Argument checks shared by every public function; each error names the argument."""

from __future__ import annotations

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

"""Hypothesis strategies shared by the stats_core tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


@st.composite
def grouped_points(
    draw,
    *,
    group_sizes: tuple[int, int] = (1, 12),
    groups: tuple[int, int] = (2, 5),
    features: tuple[int, int] = (1, 4),
    values: tuple[int, int] = (0, 3),
) -> tuple[np.ndarray, np.ndarray]:
    """(x (n, features) integer-valued floats, labels (n,) codes 0..g−1 in a drawn order).

    Integer values make distances tie and points coincide. Group sizes are drawn from ``group_sizes``;
    when every group would be a singleton the first gets two more members, so there are fewer groups
    than points (what every within-group statistic needs).
    """
    sizes = draw(st.lists(st.integers(*group_sizes), min_size=groups[0], max_size=groups[1]))
    if sum(sizes) <= len(sizes):
        sizes[0] += 2
    n = sum(sizes)
    k = draw(st.integers(*features))
    x = np.array(draw(st.lists(st.integers(*values), min_size=n * k, max_size=n * k)), float).reshape(n, k)
    order = draw(st.permutations(range(n)))
    return x, np.repeat(np.arange(len(sizes)), sizes)[list(order)]

# Type stub of the compiled module; kept in step with stats_core/src/lib.rs (kendall.rs, py.rs).
# `make lint` checks it against the built module with mypy.stubtest.

import numpy as np
import numpy.typing as npt

# PyO3 sets the module's __all__ to every name added to it (lib.rs); stubtest compares the two as sets.
__all__ = [
    "__version__",
    "bootstrap_kendall",
    "build_profile",
    "cell_column_quanta",
    "cell_factor_sums",
    "cell_forms",
    "cell_pair_sums",
    "cluster_spread",
    "gower_residual",
    "group_f",
    "group_row_sums",
    "kendall_tau_b_rows",
    "pdist",
    "permanova_factored",
    "permanova_observed",
    "permanova_quantized",
    "permanova_within",
    "permutations",
    "permutations_within",
]

__version__: str
build_profile: str

def kendall_tau_b_rows(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]: ...
def pdist(x: npt.NDArray[np.float64], metric: str) -> npt.NDArray[np.float64]: ...
def permanova_within(
    distances: npt.NDArray[np.float64], labels: npt.NDArray[np.int32], inverse_sizes: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]: ...
def permanova_quantized(
    distances: npt.NDArray[np.float64],
    labels: npt.NDArray[np.int32],
    inverse_sizes: npt.NDArray[np.float64],
    scale: float,
) -> npt.NDArray[np.float64]: ...
def permanova_factored(
    factor: npt.NDArray[np.float64], labels: npt.NDArray[np.int32], inverse_sizes: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]: ...
def gower_residual(
    distances: npt.NDArray[np.float64], factor: npt.NDArray[np.float64], means: npt.NDArray[np.float64], grand: float
) -> float: ...
def permanova_observed(
    distances: npt.NDArray[np.float64], codes: npt.NDArray[np.int32], inverse_sizes: npt.NDArray[np.float64]
) -> tuple[float, float, float, npt.NDArray[np.float64], bool]: ...
def permutations(codes: npt.NDArray[np.int32], key: int, first: int, count: int) -> npt.NDArray[np.int32]: ...
def permutations_within(
    codes: npt.NDArray[np.int32],
    order: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    key: int,
    first: int,
    count: int,
) -> npt.NDArray[np.int32]: ...
def group_row_sums(
    distances: npt.NDArray[np.float64], codes: npt.NDArray[np.int32], n_groups: int, squared: bool
) -> tuple[npt.NDArray[np.float64], bool]: ...
def group_f(
    values: npt.NDArray[np.float64], labels: npt.NDArray[np.int32], inverse_sizes: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]: ...
def bootstrap_kendall(
    samples: npt.NDArray[np.float64], reference: npt.NDArray[np.float64], indices: npt.NDArray[np.int32]
) -> npt.NDArray[np.float64]: ...
def cluster_spread(
    x: npt.NDArray[np.float64], codes: npt.NDArray[np.int32], n_groups: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def cell_pair_sums(
    squares: npt.NDArray[np.float64], cell_rows: npt.NDArray[np.int32], cells: int
) -> npt.NDArray[np.float64]: ...
def cell_column_quanta(
    quanta: npt.NDArray[np.uint32], cell_rows: npt.NDArray[np.int32], columns: npt.NDArray[np.uint8]
) -> npt.NDArray[np.uint64]: ...
def cell_factor_sums(
    factor: npt.NDArray[np.float64], cell_rows: npt.NDArray[np.int32], cells: int
) -> npt.NDArray[np.float64]: ...
def cell_forms(
    squares: npt.NDArray[np.float64], cell_rows: npt.NDArray[np.int32], vectors: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]: ...

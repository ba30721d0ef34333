"""The public export list and the three backends' kernel sets stay honest and in step with the stub."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import stats_core
from stats_core import _native, _numba, _reference

KERNELS = {
    "bootstrap_kendall",
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
}


def test_all_is_sorted_and_complete():
    assert stats_core.__all__ == sorted(stats_core.__all__)
    for name in stats_core.__all__:
        assert hasattr(stats_core, name), name


def test_every_backend_exposes_the_same_kernels():
    for module in (_native, _numba, _reference):
        missing = {k for k in KERNELS if not callable(getattr(module, k, None))}
        assert not missing, (module.__name__, missing)


def test_stub_declares_exactly_the_compiled_functions():
    stub = ast.parse((Path(_native.__file__).parent / "_native.pyi").read_text())
    declared = {node.name for node in stub.body if isinstance(node, ast.FunctionDef)}
    compiled = {name for name, obj in vars(_native).items() if callable(obj) and not name.startswith("_")}
    assert declared == compiled == KERNELS


def test_public_functions_take_backend_and_random_ones_take_seed():
    for name in [
        "pdist",
        "pdist_square",
        "permanova",
        "permdisp",
        "permanova_terms",
        "permutation_indices",
        "bootstrap_kendall_tau",
        "silhouette",
        "davies_bouldin",
        "ss_h",
        "ss_h_test",
        "kendall_tau",
    ]:
        params = inspect.signature(getattr(stats_core, name)).parameters
        assert "backend" in params, name
    for name in [
        "permanova",
        "permanova_terms",
        "permutation_indices",
        "permdisp",
        "bootstrap_kendall_tau",
        "bootstrap_indices",
        "ss_h_test",
    ]:
        assert "seed" in inspect.signature(getattr(stats_core, name)).parameters

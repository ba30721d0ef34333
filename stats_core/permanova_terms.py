"""Multi-term PERMANOVA: several factors and their interactions on one distance matrix (vegan's ``adonis2``).

The model is the linear model of Gower's centred matrix G = −½ J D² J on treatment-coded factors (McArdle &
Anderson 2001). A model's sum of squares is tr(H G), H its (centred) hat matrix; SS_T = tr(G) = Σ_{i<j} d²/n.

* ``by="terms"`` (sequential, type I): term j's SS is the gain of adding it to the terms before it; every
  term is tested against the residual of the full model, F_j = (SS_j / df_j) / (SS_R / df_R).
* ``by="margin"`` (marginal, type III): term j's SS is the gain of adding it last (full model minus the model
  without it); only terms not contained in a higher-order term are tested (R's ``drop.scope``).

Permutations move the objects' cells (all factors together; within strata when given) and recompute every
term's F on the permuted data: the full SS of G under the permutation for both schemes, as vegan's
``permutest.cca`` does for an unconditioned ``adonis2`` model. p = (k + 1) / (permutations + 1), k the
permutations whose F is at least the observed one. A term that adds no rank (confounded with earlier terms,
or by="margin" with the others) has df 0, SS 0 and NaN F, ω² and p (vegan drops its row).

Cost: one pass over the n(n−1)/2 squared distances per permutation accumulates the C × C sums between cells
(C = occupied level combinations), after which every term's SS is a quadratic form in C-vectors
(``_terms_model``): all terms together cost about one single-term pass. Where Gower's matrix has a low-rank
factor (Euclidean profiles) a screen decides most permutations in O(n·k) and recomputes the rest exactly
(``_terms_screen``); the counts, hence the p-values, are exact either way and identical on every backend.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stats_core import _resample, _terms_model, _terms_screen, _validate
from stats_core._backend import backend as auto_backend
from stats_core._backend import kernels as backend_kernels
from stats_core.errors import InvalidInputError
from stats_core.permanova import effect_sizes
from stats_core.results import PermanovaTerm, PermanovaTermsResult

BY = ("terms", "margin")
# The integer screen sweeps the distances once per design column: beyond this many the exact pass (one
# scattered add per pair and permutation) is as cheap — measured (Bray–Curtis, 24 cells, 999 permutations) at
# n = 1,000: rank 8 0.53 s screened vs 0.81 s exact, rank 14 0.85 vs 0.71; the exact pass grows faster with n.
MAX_QUANTIZED_RANK = 12


def _squared_condensed(distances: object) -> tuple[np.ndarray, np.ndarray, int]:
    """(the checked distances as given, their condensed squares (float64), n) of a condensed or square matrix."""
    dist, n = _validate.distances("distances", distances)
    condensed = dist[np.triu_indices(n, k=1)] if dist.ndim == 2 else dist
    with np.errstate(over="ignore"):
        squares = np.square(condensed, dtype=np.float64)
        total = squares.sum()
    if not np.isfinite(total):
        raise InvalidInputError("distances", f"too large to square and sum in float64 (max {condensed.max()!r})")
    return dist, squares, n


def _label(term: tuple[str, ...]) -> str:
    return ":".join(term)


def _design_columns(model: Sequence[tuple[str, ...]], fac: _terms_model.Factors) -> np.ndarray:
    """The full model's design columns at the cells (C, ·), each 0/1: products of level indicators."""
    return np.concatenate([_terms_model.term_columns(t, model[:i], fac) for i, t in enumerate(model)], axis=1)


def _tested(model: Sequence[tuple[str, ...]], by: str) -> list[int]:
    """Indices of the terms with a row: all (terms), or those in no higher-order term of the model (margin)."""
    if by == "terms":
        return list(range(len(model)))
    return [i for i, t in enumerate(model) if not any(set(t) < set(u) for u in model)]


def permutation_indices(
    n: int, permutations: int, seed: int, *, strata: object = None, backend: str = "auto"
) -> np.ndarray:
    """(permutations, n) int64 rows Π: permutation p gives object k the labels of object Π[p, k].

    These are the permutations every stats_core permutation test with this ``seed`` draws (``permanova``,
    ``permanova_terms``) unless it enumerates every distinct relabelling instead (its result's ``exact``).
    vegan's ``permutations = <matrix>`` permutes the response instead, so the matrix
    giving adonis2 the same permutations is ``np.argsort(Π, axis=1) + 1``.
    """
    count = _validate.int_at_least("permutations", permutations, 0)
    size = _validate.int_at_least("n", n, 2)
    ids = np.arange(size, dtype=np.int32)
    blocks = _resample.strata_layout(strata, size)
    rows = _resample.permuted_label_blocks(backend_kernels(backend), ids, _resample.seed_value(seed), count, blocks)
    return np.concatenate([*rows, np.empty((0, size), np.int32)]).astype(np.int64)


def permanova_terms(
    distances: object,
    factors: object,
    terms: Sequence[str] | None = None,
    *,
    by: str = "terms",
    permutations: int = 999,
    seed: int | None = None,
    strata: object = None,
    backend: str = "auto",
) -> PermanovaTermsResult:
    """PERMANOVA of ``distances`` (condensed or square, n objects) on several ``factors`` (name → n labels).

    ``terms``: model terms in order, "a" for a main effect, "a:b" for an interaction (default: each factor's
    main effect in mapping order); ``by``: "terms" (sequential SS) or "margin" (marginal SS); ``strata``: n
    block labels that permutations stay within. Returns per-term df, SS, R², F, partial ω² and permutation p
    (module doc; definitions in docs/analysis.md), with the residual and total rows.
    """
    if by not in BY:
        raise InvalidInputError("by", f"expected 'terms' or 'margin', got {by!r}")
    dist, squares, n = _squared_condensed(distances)
    columns = _terms_model.factor_columns(factors)
    model = _terms_model.parse_terms(terms, list(columns))
    used = [name for name in columns if any(name in t for t in model)]
    fac = _terms_model.check_factors(columns, used, n)
    seed_used = _resample.seed_value(seed)
    blocks = _resample.strata_layout(strata, n)
    # Where every distinct relabelling fits in the permutations asked for, each is visited once: p is exact
    # (never below the design's smallest attainable p, as a Monte Carlo p on a tiny design can be).
    count, every = _resample.relabellings(fac.cells, _validate.int_at_least("permutations", permutations, 0), blocks)
    kernels = backend_kernels(backend)
    cells = len(fac.cell_sizes)

    full = _terms_model.basis(model, model, fac)
    rank = full.vectors.shape[1]
    df_residual = n - rank - 1
    if df_residual < 1:
        raise InvalidInputError(
            "terms", f"the model has rank {rank} on n = {n} objects: no residual degrees of freedom"
        )
    tested = _tested(model, by)
    # Every tested term's SS is a signed sum of per-vector SS −½ vᵀBv over one stack of vectors: sequential,
    # its own vectors in the full model; marginal, the full model's minus those of the model without it.
    if by == "terms":
        stack = full.vectors
        signs = (full.term_of[:, None] == np.array(tested)[None, :]).astype(np.float64)
    else:
        reduced = [_terms_model.basis([u for u in model if u != model[t]], model, fac).vectors for t in tested]
        stack = np.concatenate([full.vectors, *reduced], axis=1)
        signs = np.zeros((stack.shape[1], len(tested)))
        signs[:rank] = 1.0
        for k, start in enumerate(np.cumsum([rank] + [r.shape[1] for r in reduced[:-1]])):
            signs[start : start + reduced[k].shape[1], k] = -1.0
    df = np.rint(signs.sum(axis=0)).astype(np.int64)
    terms_model = _terms_screen.Model(stack, signs, rank, df, df_residual, float(squares.sum()) / n)
    ss_total = terms_model.ss_total
    ss, residual, f = (
        v[0] for v in terms_model.stats(terms_model.exact_forms(kernels, squares, fac.cells[None], cells))
    )
    screen = (
        _terms_screen.factor_screen(kernels, dist, n, terms_model, fac.cell_sizes)
        or _terms_screen.quantized_screen(squares, terms_model, fac.cell_sizes, _design_columns(model, fac))
        if count and rank <= MAX_QUANTIZED_RANK
        else None
    )
    exceed = np.zeros(len(tested), dtype=np.int64)
    for block in _resample.permuted_label_blocks(kernels, fac.cells, seed_used, count, blocks, every=every):
        exceed += _terms_screen.count_block(kernels, terms_model, screen, squares, block, cells, f)
    rows = []
    for k, t in enumerate(tested):
        _, omega = effect_sizes(float(ss[k] + residual), float(residual), int(df[k]), df_residual, n)
        p = _resample.permutation_pvalue(int(exceed[k]), count, every is not None) if df[k] > 0 else float("nan")
        if df[k] > 0 and np.isnan(f[k]) and count:
            p = 1.0  # no variation to explain (SS_T = 0): no permutation can beat it, as stats_core.permanova says
        rows.append(
            PermanovaTerm(
                _label(model[t]),
                int(df[k]),
                float(ss[k]),
                float(ss[k]) / ss_total if ss_total > 0 else float("nan"),
                float(f[k]),
                omega if df[k] > 0 else float("nan"),
                p,
            )
        )
    return PermanovaTermsResult(
        rows=tuple(rows),
        residual_df=df_residual,
        residual_ss=float(residual),
        total_df=n - 1,
        total_ss=ss_total,
        n=n,
        permutations=count,
        seed=seed_used,
        backend=auto_backend() if backend == "auto" else backend,
        by=by,
        strata=blocks.labels if blocks is not None else None,
        exact=every is not None,
    )

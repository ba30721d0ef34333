"""Bootstrap confidence intervals for Kendall's tau-b between per-country means and reference scores.

``samples[c, d, u]`` is unit u (a seed, a respondent) of country c on dimension d. One resample draws, in
every country independently, units with replacement; the statistic is tau-b, per dimension, between the
countries' resampled means and ``reference[c, d]``. This is ``scipy.stats.bootstrap`` with one sample per
country (``paired=False``), and the indices are drawn in scipy's order: for the same integer seed the
bootstrap distribution equals scipy's. Intervals: ``percentile`` or ``bca`` (Efron & Tibshirani 1993,
14.3 and 15.4, as scipy).

The draws and the interval are public, so that every bootstrap in hofcat shares them (one random stream, one
percentile rule): ``bootstrap_indices`` draws the stratified resample indices and ``percentile_interval``
turns a bootstrap distribution into a percentile interval. ``bootstrap_kendall_tau(seed=s)`` uses
``bootstrap_indices(sizes, n_resamples, s)``; hofcat's analysis uses ``bootstrap_indices(sizes, n_resamples,
(s, condition))`` — one ``SeedSequence`` stream per condition.

Exactness: unit values are taken as given; a resampled mean is their float64 sum in unit order over the count.
With integer unit values every such sum is exact, so means equal in exact arithmetic tie in every resample.

Undefined taus (NaN: every resampled country mean equal, or a constant reference) are counted in
``undefined`` and left out of the interval and standard error, which use the remaining resamples. A cell
whose observed tau is NaN gets a NaN interval. For ``bca``, when the jackknife values are all equal the
acceleration is undefined and taken as 0 (bias-corrected percentile) instead of scipy's NaN interval.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from statistics import NormalDist

import numpy as np

from stats_core import _resample, _validate
from stats_core._backend import kernels
from stats_core.errors import InvalidInputError
from stats_core.results import BootstrapResult, ConfidenceInterval

METHODS = ("bca", "percentile")


def bootstrap_indices(sizes: Sequence[int], n_resamples: int, seed: int | Sequence[int]) -> tuple[np.ndarray, ...]:
    """Stratified bootstrap draws: for stratum k, an (n_resamples, sizes[k]) int64 array of indices into it.

    Every stratum (a country) is resampled with replacement, independently of the others. The draws come
    from one generator, ``rng = numpy.random.default_rng(numpy.random.SeedSequence(seed))``, stratum after
    stratum: stratum k's indices are ``rng.integers(0, sizes[k], (n_resamples, sizes[k]))``, which is
    ``scipy.stats.bootstrap``'s order for independent samples (``paired=False``). ``seed`` is a non-negative
    integer or a sequence of them (the SeedSequence entropy, e.g. ``(seed, condition)`` for one independent
    stream per condition). Note that numpy zero-pads short entropy, so ``(seed, 0)`` is the stream of ``seed``.
    """
    counts = [_validate.int_at_least("sizes", size, 1) for size in sizes]
    n_resamples = _validate.int_at_least("n_resamples", n_resamples, 1)
    rng = np.random.default_rng(np.random.SeedSequence(_entropy(seed)))
    return tuple(rng.integers(0, size, (n_resamples, size)) for size in counts)


def bootstrap_index_blocks(
    sizes: Sequence[int], n_resamples: int, seed: int | Sequence[int], block: int
) -> Iterator[tuple[np.ndarray, ...]]:
    """``bootstrap_indices`` in blocks of at most ``block`` resamples: the same draws, bounded memory.

    Yields, for resamples start … start + b − 1, one (b, sizes[k]) int64 array per stratum; concatenated over
    the blocks they equal ``bootstrap_indices(sizes, n_resamples, seed)`` exactly. numpy draws a run of
    ``integers`` calls with the same bounds as one call, so a first pass walks the stream stratum after stratum
    and records the generator state at each block (a few hundred bytes each); the second replays the states.
    """
    counts = [_validate.int_at_least("sizes", size, 1) for size in sizes]
    n_resamples = _validate.int_at_least("n_resamples", n_resamples, 1)
    block = _validate.int_at_least("block", block, 1)
    if block >= n_resamples:  # one block: the draws themselves, without the pass that records states
        yield bootstrap_indices(counts, n_resamples, seed)
        return
    rng = np.random.default_rng(np.random.SeedSequence(_entropy(seed)))
    starts = range(0, n_resamples, block)
    states: list[list[dict]] = []
    for size in counts:
        states.append([])
        for start in starts:
            states[-1].append(rng.bit_generator.state)
            rng.integers(0, size, (min(block, n_resamples - start), size))
    for b, start in enumerate(starts):
        out = []
        for size, stratum in zip(counts, states, strict=True):
            rng.bit_generator.state = stratum[b]
            out.append(rng.integers(0, size, (min(block, n_resamples - start), size)))
        yield tuple(out)


def percentile_interval(distribution: object, confidence_level: float = 0.95) -> ConfidenceInterval:
    """Percentile interval over the last axis (the resamples); NaN resamples are left out, NaN where none is left.

    Limits are ``numpy.quantile`` (linear interpolation) at (1 − level)/2 and (1 + level)/2 of the defined
    resamples, as ``scipy.stats.bootstrap(method="percentile")`` and ``bootstrap_kendall_tau`` compute them.
    """
    dist = np.asarray(distribution, dtype=np.float64)
    if dist.ndim < 1 or dist.shape[-1] < 1:
        raise InvalidInputError("distribution", f"expected resamples on the last axis, got shape {dist.shape}")
    alpha = _alpha(confidence_level)
    low, high = _limits(dist, np.full(dist.shape[:-1], alpha), np.full(dist.shape[:-1], 1.0 - alpha))
    return ConfidenceInterval(low, high)


def _entropy(seed: object) -> int | list[int]:
    """``seed`` checked as SeedSequence entropy: an integer in [0, 2**64) or a non-empty sequence of them."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return _resample.seed_value(seed)
    problem = f"expected a non-negative integer or a sequence of them, got {seed!r}"
    if isinstance(seed, (str, bytes)) or not isinstance(seed, (Sequence, np.ndarray)) or len(seed) == 0:
        raise InvalidInputError("seed", problem)
    try:
        return [_resample.seed_value(part) for part in seed]
    except InvalidInputError:
        raise InvalidInputError("seed", problem) from None


def _alpha(confidence_level: object) -> float:
    """(1 − confidence_level)/2, the level checked to lie in (0, 1)."""
    try:
        level = float(confidence_level)
    except (TypeError, ValueError):
        level = float("nan")
    if not 0.0 < level < 1.0:
        raise InvalidInputError("confidence_level", f"expected a number in (0, 1), got {confidence_level!r}")
    return (1.0 - level) / 2.0


def bootstrap_kendall_tau(
    samples: object,
    reference: object,
    n_resamples: int = 9999,
    confidence_level: float = 0.95,
    method: str = "percentile",
    seed: int | None = None,
    *,
    keep_distribution: bool = True,
    backend: str = "auto",
) -> BootstrapResult:
    """Tau-b per dimension with bootstrap CIs; samples (countries, dims, units) or (groups, countries, dims, units).

    ``reference`` is (countries, dims) or (groups, countries, dims). Statistic and interval arrays are
    shaped (dims,) or (groups, dims); ``bootstrap_distribution`` adds a trailing (n_resamples,) axis.
    """
    x, ref = _checked(samples, reference)
    n_resamples = _validate.int_at_least("n_resamples", n_resamples, 1)
    alpha = _alpha(confidence_level)
    if method not in METHODS:
        raise InvalidInputError("method", f"{method!r} is not one of {', '.join(map(repr, METHODS))}")
    seed_used = _resample.seed_value(seed)
    k = kernels(backend)
    _, countries, _, units = x.shape
    indices = np.stack(bootstrap_indices([units] * countries, n_resamples, seed_used)).astype(np.int32)
    observed = _tau_of_means(k, sequential_mean(x), ref)
    # (B, G, D) from the kernel → scipy's layout (G, D, B).
    distribution = np.moveaxis(_resample.over_resamples(k.bootstrap_kendall, x, ref, indices), 0, -1)
    if method == "bca":
        low_q, high_q = _bca_levels(k, x, ref, observed, distribution, alpha)
    else:
        low_q, high_q = np.full(observed.shape, alpha), np.full(observed.shape, 1.0 - alpha)
    low, high, se, undefined = _summaries(distribution, observed, low_q, high_q)
    squeeze = np.asarray(samples).ndim == 3
    shape = (lambda a: a[0]) if squeeze else (lambda a: a)
    return BootstrapResult(
        statistic=shape(observed),
        confidence_interval=ConfidenceInterval(shape(low), shape(high)),
        standard_error=shape(se),
        bootstrap_distribution=shape(distribution) if keep_distribution else None,
        undefined=shape(undefined),
        n_resamples=n_resamples,
        confidence_level=float(confidence_level),
        method=method,
        seed=seed_used,
    )


def _checked(samples: object, reference: object) -> tuple[np.ndarray, np.ndarray]:
    """samples as (G, C, D, U) and reference as (G, C, D), both C-contiguous float64."""
    x = _validate.finite_array("samples", samples, min_ndim=3)
    if x.ndim == 3:
        x = x[None]
    if x.ndim != 4:
        raise InvalidInputError(
            "samples", f"expected (countries, dims, units) or (groups, countries, dims, units), got shape {x.shape}"
        )
    groups, countries, dims, units = x.shape
    if countries < 2 or units < 2 or dims < 1:
        raise InvalidInputError("samples", f"needs >= 2 countries, >= 1 dimension and >= 2 units, got shape {x.shape}")
    ref = _validate.finite_array("reference", reference, min_ndim=2)
    if ref.shape == (countries, dims):
        ref = np.broadcast_to(ref, (groups, countries, dims))
    if ref.shape != (groups, countries, dims):
        raise InvalidInputError(
            "reference", f"expected shape {(countries, dims)} or {(groups, countries, dims)}, got {ref.shape}"
        )
    return np.ascontiguousarray(x), np.ascontiguousarray(ref)


def sequential_mean(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis summed left to right, the order every backend uses (so ties agree bitwise)."""
    total = values[..., 0].copy()
    for u in range(1, values.shape[-1]):
        total += values[..., u]
    return total / values.shape[-1]


def _tau_of_means(k: object, means: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Tau-b per (group, dim) between country means (…, G, C, D) and the reference (G, C, D) → (…, G, D)."""
    m = np.swapaxes(means, -1, -2)  # (..., G, D, C)
    r = np.broadcast_to(np.swapaxes(ref, -1, -2), m.shape)
    c = m.shape[-1]
    tau = k.kendall_tau_b_rows(np.ascontiguousarray(m.reshape(-1, c)), np.ascontiguousarray(r.reshape(-1, c)))
    return tau.reshape(m.shape[:-1])


def _jackknife_means(x: np.ndarray) -> list[np.ndarray]:
    """Per country c: (U, G, C, D) country means with unit u of country c left out (others complete)."""
    full = sequential_mean(x)
    units = x.shape[-1]
    out = []
    for c in range(x.shape[1]):
        loo = np.repeat(full[None], units, axis=0)
        for u in range(units):
            loo[u, :, c] = sequential_mean(np.delete(x[:, c], u, axis=-1))
        out.append(loo)
    return out


def _ndtr(v: np.ndarray) -> np.ndarray:
    """Standard normal CDF (stdlib), exact 0/1 at ∓inf."""
    cdf = NormalDist().cdf
    return np.vectorize(lambda t: cdf(t) if np.isfinite(t) else (np.nan if t != t else float(t > 0)), otypes=[float])(v)


def _ndtri(p: np.ndarray) -> np.ndarray:
    """Standard normal quantile (stdlib), ∓inf at 0/1."""
    inv = NormalDist().inv_cdf
    return np.vectorize(
        lambda q: inv(q) if 0 < q < 1 else (np.nan if q != q else (np.inf if q >= 1 else -np.inf)), otypes=[float]
    )(p)


def _bca_levels(k, x, ref, observed, distribution, alpha):
    """BCa quantile levels per cell (scipy's ``_bca_interval``, with acceleration 0 where undefined)."""
    valid = ~np.isnan(distribution)
    theta = observed[..., None]
    below = ((distribution < theta) & valid).sum(axis=-1) + ((distribution <= theta) & valid).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        z0 = _ndtri(below / (2.0 * valid.sum(axis=-1)))
    units = x.shape[-1]
    nums = np.zeros(observed.shape)
    dens = np.zeros(observed.shape)
    for loo in _jackknife_means(x):
        jack = np.moveaxis(_tau_of_means(k, loo, ref), 0, -1)  # (G, D, U)
        u_ji = (units - 1) * (jack.mean(axis=-1, keepdims=True) - jack)
        nums += (u_ji**3).sum(axis=-1) / units**3
        dens += (u_ji**2).sum(axis=-1) / units**2
    with np.errstate(invalid="ignore", divide="ignore"):
        a_hat = nums / 6.0 / dens**1.5
        a_hat = np.where(np.isfinite(a_hat), a_hat, 0.0)
        z_alpha = NormalDist().inv_cdf(alpha)
        num1 = z0 + z_alpha
        num2 = z0 - z_alpha
        return _ndtr(z0 + num1 / (1 - a_hat * num1)), _ndtr(z0 + num2 / (1 - a_hat * num2))


def _limits(distribution: np.ndarray, low_q: np.ndarray, high_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles ``low_q``/``high_q`` per cell of the non-NaN resamples (last axis); NaN where none or q is NaN."""
    low = np.full(distribution.shape[:-1], np.nan)
    high = np.full(distribution.shape[:-1], np.nan)
    for cell in np.ndindex(low.shape):
        values = distribution[cell][~np.isnan(distribution[cell])]
        if values.shape[0] == 0 or np.isnan(low_q[cell]) or np.isnan(high_q[cell]):
            continue
        low[cell] = np.quantile(values, low_q[cell])
        high[cell] = np.quantile(values, high_q[cell])
    return low, high


def _summaries(distribution, observed, low_q, high_q):
    """Interval limits (NaN where the observed tau is), standard error and NaN count per cell, NaNs left out."""
    low, high = _limits(distribution, low_q, high_q)
    low[np.isnan(observed)] = np.nan
    high[np.isnan(observed)] = np.nan
    se = np.full(observed.shape, np.nan)
    undefined = np.isnan(distribution).sum(axis=-1)
    for cell in np.ndindex(observed.shape):
        values = distribution[cell][~np.isnan(distribution[cell])]
        if values.shape[0] >= 2:
            se[cell] = values.std(ddof=1)
    return low, high, se, undefined

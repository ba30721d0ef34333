"""PERMANOVA, PERMDISP and the bootstrap on a Ray cluster: the same draws, split into ranges across workers.

    with stats_core.distributed.on_ray("auto", blocks_per_worker=2):
        res = stats_core.permanova(d, labels, 99_999, seed=1)   # bit-identical to the call without the block

Inside the ``with`` block every ``permanova``, ``permdisp`` and ``bootstrap_kendall_tau`` call (and whatever
calls them, such as hofcat's analysis) sends its resampling to Ray. A permutation test splits permutations
0 … P−1 into ranges; each Ray task relabels its range with the counter-based generator of ``_resample``
(permutation p depends only on (seed, p)) and counts it with the backend's kernel, and the driver sums the
integer counts — so the p-value is the single-process one bit for bit, whatever the number of workers or
ranges. The bootstrap's indices are drawn once by the driver (numpy's sequential stream, scipy's order) and
each task evaluates the kernel on a range of resamples; the distribution is stacked back in order. The
observed statistic, the PERMANOVA screen and the BCa jackknife stay in the driver.

A task is pure (its result depends only on its range), so Ray may rerun it when a worker or node dies; the
call then still returns the same result. Ray is optional: ``pip install 'hofcat[ray]'``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from stats_core import _resample, _validate
from stats_core.errors import BackendUnavailableError

INSTALL = "pip install 'hofcat[ray]'"


def ray_module() -> ModuleType:
    """The ``ray`` package, or BackendUnavailableError naming the install command when it is not installed."""
    try:
        import ray
    except ImportError:
        raise BackendUnavailableError(f"Ray is not installed; install it with {INSTALL}") from None
    return ray


LOOPBACK = "127.0.0.1"


@contextlib.contextmanager
def loopback_kept() -> Iterator[None]:
    """Inside the block, Ray keeps a loopback host (127.0.0.1, ::1, localhost) as given.

    Ray replaces a loopback host with this machine's network address wherever it meets one: in
    ``ray start --node-ip-address=127.0.0.1`` and in the address a driver connects to
    (``ray._private.services.resolve_ip_for_localhost``; ray-project/ray#59110, open in 2.52), so a cluster
    meant for one machine listens on every interface and its driver connects over the network interface.
    Nothing else in Ray resolves a loopback host; without that private function (another Ray) this does nothing.
    """
    import ray._private.services as services

    resolve = getattr(services, "resolve_ip_for_localhost", None)
    if resolve is None:
        yield
        return
    services.resolve_ip_for_localhost = lambda host: host
    try:
        yield
    finally:
        services.resolve_ip_for_localhost = resolve


def ray_init(ray: ModuleType, address: str | None, **options: Any) -> None:
    """``ray.init(address=address, **options)``, on 127.0.0.1 when the cluster is there or is started here.

    ``address`` is looked up as ``ray.init`` does (``RAY_ADDRESS``, ``"auto"``, None); a cluster at a loopback
    address is reached there, and a cluster Ray starts in this process (no cluster found, ``"local"``) gets
    127.0.0.1 as its node address, so none of its processes listens beyond loopback (see ``loopback_kept``).
    """
    if address is not None and "://" in address:  # Ray Client: its own server, addressed as given
        ray.init(address=address, **options)
        return
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # another Ray, without the lookup this mirrors: its own choices stand
        ray.init(address=address, **options)
        return
    with loopback_kept():
        if canonicalize_bootstrap_address(address, None) is None:  # ray.init will start a cluster here
            options = {**options, "_node_ip_address": LOOPBACK}
        ray.init(address=address, **options)


def ranges(total: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """At most ``parts`` non-empty [first, stop) ranges covering 0 … total−1, inner bounds multiples of ``align``.

    ``align`` = LANES keeps every range but the last a whole number of the compiled kernel's lane groups.
    """
    bounds = sorted({min(total, round(i * total / parts / align) * align) for i in range(1, parts)} | {0, total})
    return [(a, b) for a, b in itertools.pairwise(bounds) if b > a]


def _count_range(shared: tuple[Callable[[np.ndarray], int], _resample.Design], first: int, stop: int) -> tuple:
    """Ray task: the count of permutations first … stop−1 → (count, Ray node id that ran it)."""
    count_block, design = shared
    return _resample.count_range(count_block, design, first, stop), _node_id()


def _resample_range(shared: tuple[Callable[..., np.ndarray], np.ndarray, np.ndarray], indices: np.ndarray) -> tuple:
    """Ray task: the kernel on one range of bootstrap resamples → (statistics (b, …), Ray node id that ran it)."""
    kernel, x, ref = shared
    return kernel(x, ref, indices), _node_id()


def _node_id() -> str:
    """The id of the Ray node running the current task (recorded so that callers can see where work ran)."""
    import ray

    return ray.get_runtime_context().get_node_id()


@dataclass
class RayDistributor:
    """Sends stats_core calls' resampling to Ray tasks, ``tasks`` ranges per call (a ``_resample.Distributor``)."""

    ray: ModuleType
    tasks: int
    nodes: list[str] = field(default_factory=list)  # node id of every range run so far, in submission order
    _remotes: dict[str, Any] = field(default_factory=dict)

    def _remote(self, function: Callable) -> Any:
        """The Ray remote version of a module-level task function (one CPU per task), made once."""
        if function.__name__ not in self._remotes:
            self._remotes[function.__name__] = self.ray.remote(num_cpus=1)(function)
        return self._remotes[function.__name__]

    def count(self, count_block: Callable[[np.ndarray], int], design: _resample.Design) -> int:
        """Sum of the ranges' counts; the design and counting closure go to the object store once per call."""
        if design.permutations == 0:
            return 0
        shared = self.ray.put((count_block, design))
        task = self._remote(_count_range)
        refs = [task.remote(shared, a, b) for a, b in ranges(design.permutations, self.tasks, _resample.LANES)]
        done = self.ray.get(refs)
        self.nodes.extend(node for _, node in done)
        return sum(count for count, _ in done)

    def resamples(
        self, kernel: Callable[..., np.ndarray], x: np.ndarray, ref: np.ndarray, indices: np.ndarray
    ) -> np.ndarray:
        """``kernel(x, ref, indices)`` evaluated per range of resamples (indices' axis 1), stacked on axis 0."""
        shared = self.ray.put((kernel, x, ref))
        task = self._remote(_resample_range)
        refs = [
            task.remote(shared, np.ascontiguousarray(indices[:, a:b])) for a, b in ranges(indices.shape[1], self.tasks)
        ]
        done = self.ray.get(refs)
        self.nodes.extend(node for _, node in done)
        return np.concatenate([part for part, _ in done], axis=0)


@contextlib.contextmanager
def on_ray(
    address: str | None = None, *, blocks_per_worker: int = 1, workers: int | None = None
) -> Iterator[RayDistributor]:
    """Run the resampling of stats_core calls inside the block on Ray → the distributor (``.nodes``: where).

    ``address``: a Ray cluster (``"auto"``, ``"HOST:PORT"``, ``"ray://HOST:10001"``) or None for Ray's default
    (``RAY_ADDRESS``, else a local cluster); a connection already open (``ray.init`` called) is used as it is
    and left open. Each call is split into ``workers × blocks_per_worker`` ranges; ``workers`` defaults to the
    cluster's CPUs. Raises BackendUnavailableError when Ray is not installed.
    """
    per_worker = _validate.int_at_least("blocks_per_worker", blocks_per_worker, 1)
    count = None if workers is None else _validate.int_at_least("workers", workers, 1)
    ray = ray_module()
    opened = not ray.is_initialized()
    if opened:
        ray_init(ray, address, include_dashboard=False, configure_logging=False)
    try:
        if count is None:
            count = max(1, int(ray.cluster_resources().get("CPU", 1)))
        distributor = RayDistributor(ray, count * per_worker)
        token = _resample.DISTRIBUTOR.set(distributor)
        try:
            yield distributor
        finally:
            _resample.DISTRIBUTOR.reset(token)
    finally:
        if opened:
            ray.shutdown()

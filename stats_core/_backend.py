"""Backend selection: the only module that imports the compiled extension or numba.

Order of preference is native (Rust, ``stats_core._native``) → numba → numpy reference. The environment
variable ``STATS_CORE_BACKEND`` (``auto``, ``native``, ``numba``, ``numpy``) forces one for the whole
process; a per-call ``backend=`` argument does the same for one call. A backend is skipped only when it
cannot be imported — never because it raised at run time — and the fallback is announced once.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from types import ModuleType

from stats_core.errors import BackendUnavailableError, InvalidInputError

BACKENDS = ("native", "numba", "numpy")
ENV_VAR = "STATS_CORE_BACKEND"

_MODULES = {
    "native": "stats_core._native",
    "numba": "stats_core._numba",
    "numpy": "stats_core._reference",
}


class BackendFallbackWarning(RuntimeWarning):
    """Emitted once when the preferred backend cannot be loaded and a slower one is used."""


@cache
def _load(name: str) -> ModuleType | BackendUnavailableError:
    """Import one backend's kernel module, or return why it is unavailable."""
    try:
        module = importlib.import_module(_MODULES[name])
    except ImportError as exc:
        return BackendUnavailableError(f"stats_core backend {name!r} is unavailable: {exc}")
    if name == "native":
        _check_native_version(module)
    return module


def _check_native_version(module: ModuleType) -> None:
    """A stale compiled module (rebuilt Python, old .so) must fail loudly rather than compute silently."""
    built = module.__version__
    try:
        installed = importlib.metadata.version("hofcat")
    except importlib.metadata.PackageNotFoundError:
        return
    if built != installed:
        raise BackendUnavailableError(
            f"stats_core._native is version {built} but hofcat is {installed}: rebuild with `make build`"
        )


def other_native_build(path: str) -> ModuleType:
    """Another build of the compiled module (the path of its ``.so``), imported beside the current one under a
    private name: for benchmarks that time two builds side by side (``native_build``)."""
    spec = importlib.util.spec_from_file_location("stats_core_before._native", path)
    if spec is None or spec.loader is None:
        raise BackendUnavailableError(f"{path}: not a loadable build of stats_core._native")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def native_build(module: ModuleType) -> Iterator[None]:
    """Inside the block, ``backend="native"`` runs ``module`` (from ``other_native_build``); restored after."""
    name = _MODULES["native"]
    current = sys.modules.get(name)
    sys.modules[name] = module
    _load.cache_clear()
    try:
        yield
    finally:
        if current is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = current
        _load.cache_clear()


@cache
def _auto() -> str:
    """The fastest importable backend, honouring STATS_CORE_BACKEND; warns once on fallback."""
    forced = os.environ.get(ENV_VAR, "auto").strip().lower() or "auto"
    if forced != "auto":
        return _validated(forced, source=ENV_VAR)
    reasons = []
    for name in BACKENDS:
        loaded = _load(name)
        if isinstance(loaded, ModuleType):
            if reasons:
                warnings.warn(
                    f"stats_core is using the {name} backend: " + "; ".join(reasons),
                    BackendFallbackWarning,
                    stacklevel=3,
                )
            return name
        reasons.append(str(loaded))
    raise BackendUnavailableError("no stats_core backend could be loaded: " + "; ".join(reasons))


def _validated(name: str, *, source: str) -> str:
    """Check a requested backend name and that it loads."""
    if name not in BACKENDS:
        raise InvalidInputError(source, f"{name!r}: expected one of 'auto', {', '.join(map(repr, BACKENDS))}")
    loaded = _load(name)
    if isinstance(loaded, BackendUnavailableError):
        raise loaded
    return name


def backend() -> str:
    """Name of the backend in use when ``backend="auto"``: 'native', 'numba' or 'numpy'."""
    return _auto()


def kernels(requested: str = "auto") -> ModuleType:
    """Kernel module for a ``backend=`` argument ('auto', 'native', 'numba', 'numpy')."""
    name = _auto() if requested == "auto" else _validated(requested, source="backend")
    module = _load(name)
    assert isinstance(module, ModuleType)
    return module


def available() -> tuple[str, ...]:
    """Backends importable in this process, fastest first."""
    return tuple(name for name in BACKENDS if isinstance(_load(name), ModuleType))

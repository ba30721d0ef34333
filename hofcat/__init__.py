"""hofcat: measure the cultural values language models express with Hofstede's VSM 2013, at sweep scale.

``import hofcat`` is the documented entry point (docs/python-api.md)::

    import hofcat
    spec = hofcat.load_spec("spec.toml")
    hofcat.run_sweep(spec, "runs/r1")
    hofcat.analyze_run("runs/r1")

hofcat's code lives in the top-level packages ``runner`` and ``stats_core`` (installed beside this one). A
research folder often holds its own ``runner.py`` or ``runner/``, which Python finds first when the folder is the
working directory (a notebook, ``python script.py``, ``python -m``). This package therefore loads hofcat's own
``runner`` and ``stats_core`` from the folder it was installed in, by file location, before anything else can
claim those names; every later ``import runner`` in the process, hofcat's own included, gets hofcat's. A user
module of that name imported earlier is refused with a one-line ``ImportError`` saying what to do, rather than
mixed with hofcat's.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__: list[str] = []  # filled below from runner's own list

CODE_ROOT = Path(__file__).resolve().parent.parent  # the folder holding hofcat/, runner/ and stats_core/


def _own(name: str, *, lazy: bool = False) -> ModuleType:
    """hofcat's package ``name`` (``CODE_ROOT/name``), imported by location and registered as ``name``."""
    folder = CODE_ROOT / name
    loaded = sys.modules.get(name)
    if loaded is not None:
        where = getattr(loaded, "__file__", None)
        if where is not None and Path(where).resolve().parent == folder:
            return loaded
        raise ImportError(
            f"hofcat needs the module name {name!r}, but {where or loaded!r} was imported under it first (a "
            f"module of the working folder?); import hofcat before it, or rename that module"
        )
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"hofcat is incomplete: no package {name!r} in {CODE_ROOT}")
    if lazy:  # executed on first attribute access: ``import hofcat`` stays light (stats_core imports numpy)
        spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


_own("runner")
_own("stats_core", lazy=True)

_runner = sys.modules["runner"]
__version__: str = _runner.__version__
__all__ = list(_runner.__all__)

if TYPE_CHECKING:
    from runner.api import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """The Python API's names (``runner.api``), imported on first use."""
    if name not in __all__:
        raise AttributeError(f"module 'hofcat' has no attribute {name!r}")
    value = getattr(_runner, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

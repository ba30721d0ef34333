"""Where hofcat finds its shipped data: the instrument, prompt templates, reference scores and examples.

The data ships inside the package (``runner/data``; the checkout's top-level ``data/`` is a link to it), so
an installed wheel finds it wherever it lives. ``HOFCAT_DATA_DIR`` points elsewhere, e.g. at a copy with an
extended instrument.
"""

from __future__ import annotations

import os
import re
from importlib.resources import files
from pathlib import Path

# A wheel installs as plain files, so the package's resource folder is a real directory.
DATA_DIR = Path(os.environ.get("HOFCAT_DATA_DIR") or str(files("runner").joinpath("data")))
EXAMPLES_DIR = DATA_DIR / "examples"

_LANGUAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # a file stem: no slash, dot or NUL


def language_file(folder: Path, language: str) -> Path | None:
    """``folder/<language>.json``, or None when ``language`` is not a plain name (a spec's language is data: it
    never becomes a path outside ``folder``)."""
    return folder / f"{language}.json" if isinstance(language, str) and _LANGUAGE.fullmatch(language) else None

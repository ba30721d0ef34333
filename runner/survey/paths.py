"""Where hofcat finds its shipped data: the instrument, prompt templates, reference scores and examples.

The data ships inside the package (``runner/data``; the checkout's top-level ``data/`` is a link to it), so
an installed wheel finds it wherever it lives. ``HOFCAT_DATA_DIR`` points elsewhere, e.g. at a copy with an
extended instrument.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

# A wheel installs as plain files, so the package's resource folder is a real directory.
DATA_DIR = Path(os.environ.get("HOFCAT_DATA_DIR") or str(files("runner").joinpath("data")))
EXAMPLES_DIR = DATA_DIR / "examples"

"""Where hofcat finds its shipped data (the instrument, reference scores, templates)."""

from __future__ import annotations

import os
from pathlib import Path

# hofcat is installed in development mode from its checkout (`make build`), so data/ sits beside runner/.
# HOFCAT_DATA_DIR points elsewhere, e.g. for an installed wheel or a user's extended instrument.
DATA_DIR = Path(os.environ.get("HOFCAT_DATA_DIR", Path(__file__).resolve().parent.parent / "data"))

"""``python -m hofcat ARGS``: the ``hofcat`` command."""

import sys

from hofcat.cli import main

sys.exit(main())

"""Shared test fixtures and the policy for tests that need programs outside Python."""

from __future__ import annotations

import os
import shutil

import pytest

# .ci/run installs R (vegan) and Chromium and sets this, so that a missing program fails CI instead of
# silently skipping the comparison it guards.
REQUIRE_EXTERNAL = os.environ.get("HOFCAT_REQUIRE_EXTERNAL") == "1"


def require_program(name: str) -> str:
    """Path of a system program; skips the test locally, fails it in CI, when the program is missing."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (.ci/run installs it)"
        if REQUIRE_EXTERNAL:
            pytest.fail(message)
        pytest.skip(message)
    return path

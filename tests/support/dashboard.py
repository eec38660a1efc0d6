"""What the dashboard's tests and bench share: the operator secret they log in with, the
hostile label, and Debian's Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
SECRET = "operators-only-" + "s" * 32
HOSTILE = "<script>alert(1)</script>"


def chromium_or_skip() -> Path:
    """Debian's Chromium; outside CI a machine without it skips the browser tests."""
    if not CHROMIUM.exists() and not os.environ.get("CI"):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium); CI installs it")
    return CHROMIUM

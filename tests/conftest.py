import os
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def test_root() -> Path:
    """Where tests put clusters and runs (scripts/test.sh sets AVAILPROOF_TEST_ROOT)."""
    root = os.environ.get("AVAILPROOF_TEST_ROOT") or tempfile.mkdtemp(prefix="availproof-test.")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path

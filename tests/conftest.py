"""Shared fixtures: the real-data folder and its skip rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from monai_forget.data import data_root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real-data folder (``MONAI_FORGET_DATA``); skips the test when it is absent."""
    root = data_root()
    if not root.is_dir():
        pytest.skip(f"real data not found at {root}; set MONAI_FORGET_DATA to ../shared/data")
    return root

"""pydicom's bundled real DICOM files, shared by the injector's tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from pydicom.data import get_testdata_file


def real_file(name: str) -> Path:
    """The path of pydicom test file ``name``; skips the test when it is not installed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = get_testdata_file(name)
    if path is None:
        pytest.skip(f"pydicom test file {name} is not available")
    return Path(path)

"""Shared fixtures: the real-data folder and its skip rule."""

from __future__ import annotations

import os
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


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, share the cores among the workers: each worker (and every
    process it starts, through ``OMP_NUM_THREADS``) gets its share of threads. Two
    workers of two threads each on a 2-core machine oversubscribe OpenMP, which made
    small-model inference many times slower (measured in the segmentation bundle test)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        threads = max(1, (cores or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)

"""The exhaustive threshold search against the sorted one (the EMA auditor's thresholds),
shared by ``threshold_search.py`` and ``withdrawal_audit_grid.py``."""

from __future__ import annotations

import time

import numpy as np

from monai_forget.stats import best_balanced_threshold, best_balanced_threshold_exhaustive


def _best_time(fn, *args, repeats: int) -> tuple[float, object]:
    """Best-of-``repeats`` wall time (perf_counter) and the last result."""
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


def compare_threshold_search(n: int = 10_000, seed: int = 0) -> dict:
    """Time both searches on ``n`` continuous scores (half members, shifted by +0.5).

    Args:
        n: total number of scores (members + non-members), ~n distinct candidates.
        seed: seed of the random scores.

    Returns:
        dict with keys n, fast_seconds (best of 5), exhaustive_seconds (best of 3),
        speedup and identical (same threshold and balanced accuracy).
    """
    rng = np.random.default_rng(seed)
    members = rng.normal(0.5, 1.0, size=n // 2)
    nonmembers = rng.normal(0.0, 1.0, size=n - n // 2)
    fast_s, fast = _best_time(best_balanced_threshold, members, nonmembers, repeats=5)
    slow_s, slow = _best_time(best_balanced_threshold_exhaustive, members, nonmembers, repeats=3)
    return {
        "n": n,
        "fast_seconds": fast_s,
        "exhaustive_seconds": slow_s,
        "speedup": slow_s / fast_s,
        "identical": fast == slow,
    }

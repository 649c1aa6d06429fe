"""Speed of the sorted balanced-accuracy threshold search vs brute force.

EMA (Huang, Li & Li 2021, Step 1) picks, per metric and class, the threshold that
maximises balanced accuracy. ``best_balanced_threshold`` sorts once
(O(n log n)); ``best_balanced_threshold_exhaustive`` loops over every candidate
(O(n^2)). Both must return the identical threshold and balanced accuracy.

Run: ``python benchmarks/threshold_search.py``
"""

from __future__ import annotations

from _threshold_search import (
    compare_threshold_search,
)

if __name__ == "__main__":
    r = compare_threshold_search()
    print(
        f"threshold search n={r['n']}: sorted {r['fast_seconds']:.4f} s, "
        f"exhaustive {r['exhaustive_seconds']:.2f} s, {r['speedup']:.0f}x faster, "
        f"identical thresholds: {r['identical']}"
    )

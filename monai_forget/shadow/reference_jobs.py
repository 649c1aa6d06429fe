"""Reference models by index: job ``i`` of an audit that needs many, the same anywhere.

An auditor that trains many reference models (each on a random part of the data it
controls) numbers them ``0, 1, 2, ...``. Job ``i`` is fully defined by the data, the
fraction, the base seed and ``i`` (:func:`reference_subset`), and its weights are an
ordinary cache entry (``cache_dir/shadow/<key>.pt``), so a scheduler can train jobs on
many machines into a shared cache (``monai-forget shadow train``; see
docs/reference_models.md) and the audit then only reads the cache.
"""

from __future__ import annotations

from collections.abc import Iterable

from monai_forget.checks import INDEX, check_in
from monai_forget.data import LabelledImages


def reference_subset(
    data: LabelledImages, index: int, fraction: float = 0.5, seed: int = 0
) -> tuple[LabelledImages, int]:
    """The ``index``-th reference model's training set and training seed.

    The set is a seeded random ``fraction`` of ``data``, stratified by label as
    :meth:`LabelledImages.split` does, drawn with seed ``seed + index``; the model
    trains with seed ``seed + index`` too.

    Raises:
        ValueError: a negative ``index``, or a ``fraction`` not strictly between 0 and 1.
    """
    check_in("index", index, INDEX)
    job_seed = int(seed) + int(index)
    return data.split(fraction, seed=job_seed)[0], job_seed


def reference_jobs(
    data: LabelledImages, indices: Iterable[int], fraction: float = 0.5, seed: int = 0
) -> tuple[list[LabelledImages], list[int]]:
    """Training sets and seeds of the reference models ``indices``, for
    :meth:`~monai_forget.shadow.ShadowTrainer.train_many`."""
    jobs = [reference_subset(data, i, fraction, seed) for i in indices]
    return [subset for subset, _ in jobs], [job_seed for _, job_seed in jobs]

"""Leak scans against reference models: every text's M relative to what models of the
same design, trained without any roster name, do with it.

Why (measured, benchmarks/results/unique_feature_memorisation.md): random decoys are not
exchangeable with every real name. On MLP-1 models trained on MNIST without any name,
UMA and ADA ranked first among 50 names in every control scan and were flagged in 3 of
20, because those strings move any model of the design more than random strings do.
Taking each text's M relative to reference models (the idea of LiRA's reference models,
Carlini et al. 2022, applied to features; ours) removes that part.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from monai_forget.memorisation.decoys import decoy_template

__all__ = [
    "MIN_REFERENCES",
    "check_reference_count",
    "in_decoy_units",
    "relative_to_each_set",
    "relative_to_references",
]

#: Fewest reference models a scan takes: their spread per text sets the scale.
MIN_REFERENCES = 2


def check_reference_count(n: int) -> None:
    """Refuse too few reference models (none is fine: the scan then uses decoys only)."""
    if 0 < n < MIN_REFERENCES:
        raise ValueError(
            f"{n} reference model(s) given: a scan against reference models needs at least "
            f"{MIN_REFERENCES} reference models (their spread sets the scale); pass more, or none"
        )


def in_decoy_units(m: np.ndarray, texts: Sequence[str], n_names: int) -> np.ndarray:
    """Each text's M on one model in units of its kind's decoys on that model:
    ``(M - mean) / sd`` over the decoys of the same kind (``texts[n_names:]``)."""
    m = np.asarray(m, dtype=np.float64)
    kinds = np.array([decoy_template(t) for t in texts])
    out = np.empty_like(m)
    for kind in np.unique(kinds):
        mine = kinds == kind
        decoys = m[n_names:][mine[n_names:]]
        spread = decoys.std() or 1.0  # one decoy, or all alike: leave the scale as is
        out[mine] = (m[mine] - decoys.mean()) / spread
    return out


def relative_to_references(
    target_m: np.ndarray, reference_m: Sequence[np.ndarray], texts: Sequence[str], n_names: int
) -> tuple[np.ndarray, np.ndarray]:
    """The statistic a scan with reference models ranks, and the references' mean.

    Every model's M (names first, then decoys, as in ``texts``) is put in units of its own
    decoys (:func:`in_decoy_units`: models of one design differ in how strongly any text
    moves them). For each text, the references' mean mu is subtracted from the target's
    value and the difference divided by the references' spread for that text, shrunk
    half-way to the spread pooled over all texts: ``sqrt((s_text^2 + s_pooled^2) / 2)``
    (LiRA's per-example variance, Carlini et al. 2022, steadied for a handful of
    reference models). A text whose effect varies a lot between models of the design
    then needs a larger effect on the target. When the references agree on every text
    (no spread), the statistic is the plain difference.

    Measured on the benchmark's control scans (benchmarks/results/
    leak_scan_references.md), three variants: the plain difference, this one, and the
    unshrunk per-text spread; this one was chosen on those same scans.

    Returns:
        ``(statistic, references' mean)``, one value per text.
    """
    check_reference_count(len(reference_m))
    units = np.stack([in_decoy_units(r, texts, n_names) for r in reference_m])
    mean = units.mean(axis=0)
    spread = units.std(axis=0, ddof=1)
    pooled = float(np.sqrt(np.mean(spread**2)))
    scale = np.sqrt((spread**2 + pooled**2) / 2) if pooled > 0 else np.ones_like(mean)
    return (in_decoy_units(target_m, texts, n_names) - mean) / scale, mean


def relative_to_each_set(
    target_m: np.ndarray,
    reference_m: Sequence[np.ndarray],
    texts: Sequence[str],
    n_names: int,
    sets: Sequence[tuple[int, ...]],
) -> dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]:
    """:func:`relative_to_references` against each distinct set of references in
    ``sets`` (indices into ``reference_m``), e.g. per name those that never saw its
    patient; the empty set gives the target's own M and a mean of 0 (no references).

    Returns:
        ``{set: (statistic, references' mean)}``, one value per text in each.
    """
    out = {}
    for subset in dict.fromkeys(tuple(s) for s in sets):
        if subset:
            chosen = [reference_m[k] for k in subset]
            out[subset] = relative_to_references(target_m, chosen, texts, n_names)
        else:
            out[subset] = (np.asarray(target_m, dtype=np.float64), np.zeros(len(texts)))
    return out

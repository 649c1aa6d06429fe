"""A test of M against reference models: does the audited model react to the feature more
than models of its design trained without it?

Why (measured, benchmarks/results/unique_feature_memorisation.md): the paper's t-test
compares d_u with d_r on one model, so a feature that moves every model of the design
more than random patches do fires it on models that never saw the feature (controls);
ranking M among decoys of the feature's kind is valid only when the decoys are
exchangeable with the feature, and with 26 letters it needs rank 1 to reach 0.05.
Reference models (the idea of LiRA's, Carlini et al. 2022; applied to M here, ours, not
the paper's) give the null directly: M of the same feature, probes and random controls
on models trained by the same recipe without the feature.

Under that null the audited model's M and the references' M_1..M_n are exchangeable.
Two p-values are reported:

* the decision, a one-sided Student prediction test for one new observation:
  ``t = (M - mean) / (s * sqrt(1 + 1/n))`` with the references' mean and sample standard
  deviation ``s``, ``p = P(T_{n-1} >= t)``: the classical prediction interval for one
  future observation of a normal sample (e.g. Hahn & Meeker, *Statistical Intervals*,
  1991), exact when the n + 1 values are independent and Gaussian;
* beside it, the rank p ``(1 + #{M_j >= M}) / (1 + n)``, exact under exchangeability
  alone but never below ``1 / (n + 1)`` (19 references to reach 0.05).

Measured (benchmarks/results/unique_feature_memorisation.md, 8 references): at its level
on MLP-1 (2/40 control models flagged on MNIST and on PneumoniaMNIST) and on CNN-1 /
PneumoniaMNIST (2/40); above it on CNN-1 / MNIST (3/40, exact binomial test of a rate
above 5 %: p = 0.32) and CNN-2 / MNIST (6/40, p = 0.014), where M over models without the feature is
right-skewed (skewness 1.6-1.7), which the Gaussian prediction test does not allow for.
Where false alarms matter, use 19 or more references and the rank p.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.stats

from monai_forget.memorisation.reference_scan import MIN_REFERENCES

__all__ = ["ReferenceTest", "reference_test"]


@dataclass(frozen=True)
class ReferenceTest:
    """M of the audited model against M of reference models (module docstring).

    Attributes:
        m: M of the audited model.
        reference_m: M of each reference model (read-only).
        statistic: the prediction t statistic.
        pvalue: its one-sided p-value (the decision).
        rank_pvalue: ``(1 + #{reference M >= m}) / (1 + n)``.
    """

    m: float
    reference_m: np.ndarray
    statistic: float
    pvalue: float
    rank_pvalue: float

    @property
    def n(self) -> int:
        """Number of reference models."""
        return int(self.reference_m.size)

    def summary(self) -> str:
        mean, sd = float(self.reference_m.mean()), float(self.reference_m.std(ddof=1))
        return (
            f"against {self.n} reference models (their M {mean:.6g} +- {sd:.3g}): prediction "
            f"t = {self.statistic:.4g}, p = {self.pvalue:.4g}; rank p = {self.rank_pvalue:.4g}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "m": self.m,
            "reference_m": self.reference_m.tolist(),
            "statistic": self.statistic,
            "pvalue": self.pvalue,
            "rank_pvalue": self.rank_pvalue,
        }


def reference_test(m: float, reference_m: object) -> ReferenceTest:
    """Test M of the audited model against M of reference models (module docstring).

    Args:
        m: M of the audited model.
        reference_m: M of each reference model, computed with the same feature, probes
            and random-control seed.

    Raises:
        ValueError: fewer than :data:`MIN_REFERENCES` references, a non-finite M, or
            references whose M are all equal (no spread to judge a difference by).
    """
    refs = np.array(reference_m, dtype=np.float64, copy=True).ravel()
    if refs.size < MIN_REFERENCES:
        raise ValueError(
            f"{refs.size} reference model(s) given: the test needs at least "
            f"{MIN_REFERENCES} (their spread sets the scale); pass more"
        )
    if not (np.isfinite(refs).all() and np.isfinite(m)):
        raise ValueError("M of the audited model or of a reference is not finite; check outputs")
    if refs.max() == refs.min():
        raise ValueError(
            "every reference model has the same M: they look like copies of one model; "
            "train each reference with its own seed"
        )
    n = refs.size
    t = (float(m) - refs.mean()) / (refs.std(ddof=1) * np.sqrt(1 + 1 / n))
    refs.flags.writeable = False
    return ReferenceTest(
        m=float(m),
        reference_m=refs,
        statistic=float(t),
        pvalue=float(scipy.stats.t.sf(t, n - 1)),
        rank_pvalue=(1 + int(np.count_nonzero(refs >= m))) / (1 + n),
    )

"""Unique-feature memorisation M as a MONAI metric (Hartley & Tsaftaris 2022, Eq. 1).

A MONAI evaluator runs :class:`~monai_forget.memorisation.FeatureProbe` (the audited
model on clean, z_u- and z_r-carrying copies of each batch) over out-of-distribution
probes. :class:`UniqueFeatureMemorisationMetric` turns each batch's ``(B, 3, K)``
outputs into d_u^i and d_r^i and aggregates M with its one-tailed test;
:func:`compute_unique_feature_memorisation` is its functional twin and
:class:`monai_forget.handlers.UniqueFeatureMemorisation` the ignite handler.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from monai.metrics import CumulativeIterationMetric

from monai_forget.memorisation.score import (
    MemorisationScore,
    compute_m_score,
    m_score_from_divergences,
)
from monai_forget.memorisation.significance import PAPER_TEST
from monai_forget.scores import check_probabilities
from monai_forget.stats import kl_divergence

__all__ = ["UniqueFeatureMemorisationMetric", "compute_unique_feature_memorisation"]


def _split(y_pred: torch.Tensor | np.ndarray) -> tuple[Any, Any, Any]:
    arr = torch.as_tensor(y_pred).detach().cpu().double()
    if arr.ndim != 3 or arr.shape[1] != 3:
        raise ValueError(
            f"memorisation outputs must be (N, 3, K) [clean, unique, random], got "
            f"{tuple(arr.shape)}; wrap the model in FeatureProbe"
        )
    return arr[:, 0], arr[:, 1], arr[:, 2]


def compute_unique_feature_memorisation(
    y_pred: torch.Tensor | np.ndarray,
    *,
    from_logits: bool = True,
    test: str = PAPER_TEST,
    tests: Sequence[str] | None = None,
) -> MemorisationScore:
    """M (Eq. 1) from ``(N, 3, K)`` outputs [clean, with z_u, with z_r] (see FeatureProbe).

    Args:
        y_pred: the stacked outputs; logits unless ``from_logits=False``.
        from_logits: apply a softmax first (FeatureProbe returns the model's logits).
        test, tests: see :func:`~monai_forget.memorisation.compute_m_score`.
    """
    pc, pu, pr = _split(y_pred)
    return compute_m_score(pc, pu, pr, from_logits=from_logits, test=test, tests=tests)


class UniqueFeatureMemorisationMetric(CumulativeIterationMetric):
    """Accumulates d_u^i and d_r^i over an evaluation and aggregates M (Eq. 1).

    Each batch's ``y_pred`` is ``(B, 3, K)`` (from FeatureProbe); ``y`` is ignored
    (probes are out of distribution). ``aggregate`` returns M and keeps the full
    :class:`~monai_forget.memorisation.MemorisationScore` in ``last_score``.

    Args:
        from_logits: ``y_pred`` holds logits.
        test: the primary test; ``tests``: the tests to run (default all).
    """

    def __init__(
        self,
        from_logits: bool = True,
        test: str = PAPER_TEST,
        tests: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.from_logits = from_logits
        self.test = test
        self.tests = tests
        self.last_score: MemorisationScore | None = None

    def _compute_tensor(self, y_pred: torch.Tensor, y: torch.Tensor | None = None, **kwargs: Any):  # type: ignore[override]
        pc, pu, pr = (
            check_probabilities(p, from_logits=self.from_logits)[0] for p in _split(y_pred)
        )
        d = np.stack([kl_divergence(pc, pu), kl_divergence(pc, pr)], axis=1)
        return torch.from_numpy(d)

    def aggregate(self) -> float:  # type: ignore[override]
        d = self.get_buffer()
        if not isinstance(d, torch.Tensor) or d.numel() == 0:
            raise ValueError("no probe outputs were accumulated; run the evaluator first")
        d = d.numpy()
        self.last_score = m_score_from_divergences(
            d[:, 0], d[:, 1], test=self.test, tests=self.tests
        )
        return self.last_score.m

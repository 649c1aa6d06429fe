"""M as a MONAI metric for evaluators (Hartley & Tsaftaris 2022, Eq. 1).

A MONAI evaluator runs one network over batches of probes. :class:`FeatureProbe` wraps
the audited model so that each batch of clean probes x_c yields, in one forward pass
over ``[x_c; x_u; x_r]``, outputs of shape ``(B, 3, K)``: clean, with z_u, with a fresh
random z_r. :class:`MemorisationMetric` turns these into d_u^i and d_r^i batch by batch
and aggregates M with its one-tailed test; :func:`compute_memorisation_metric` is its
functional twin and :class:`MemorisationScoreHandler` the ignite handler.

Example (a MONAI ``SupervisedEvaluator`` over an out-of-distribution probe loader)::

    probe_net = FeatureProbe(model, UniqueFeature.from_text("ANNA"))
    evaluator = SupervisedEvaluator(device, loader, probe_net,
        key_val_metric={"M": MemorisationScoreHandler()})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from monai.handlers import IgniteMetricHandler
from monai.handlers.utils import from_engine
from monai.metrics import CumulativeIterationMetric
from torch import nn

from monai_forget.memorisation.feature import RandomFeature, UniqueFeature
from monai_forget.memorisation.score import (
    MemorisationScore,
    compute_m_score,
    m_score_from_divergences,
)
from monai_forget.memorisation.significance import PAPER_TEST
from monai_forget.scores import check_probabilities
from monai_forget.stats import kl_divergence

_DEFAULT_OUTPUT = from_engine(["pred", "label"])

__all__ = [
    "FeatureProbe",
    "MemorisationMetric",
    "MemorisationScoreHandler",
    "compute_memorisation_metric",
]


class FeatureProbe(nn.Module):
    """``model`` run on clean, z_u- and z_r-carrying copies of a batch in one pass.

    ``forward(x)`` with ``x`` of shape ``(B, C, H, W)`` returns ``(B, 3, K)``: the
    outputs on ``x``, on ``x`` with the unique feature and on ``x`` with one fresh random
    feature per probe (Hartley & Tsaftaris 2022, Sec. 2.3). The input is not modified.

    Args:
        model: the audited classifier, ``(B, C, H, W) -> (B, K)``.
        feature: the unique feature z_u.
        random_feature: ``"patch"`` (the paper's) or ``"text"``.
        seed: seed of the random features; :meth:`reset` restarts the stream, so two
            passes over the same loader see the same controls.
    """

    def __init__(
        self,
        model: nn.Module,
        feature: UniqueFeature,
        random_feature: RandomFeature = "patch",
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.model = model
        self.feature = feature
        self.random_feature = random_feature
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        """Restart the random-feature stream from ``seed``."""
        self._rng = np.random.default_rng(self.seed)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        masks = self.feature.random_masks(len(x), self._rng, self.random_feature)
        batch = torch.cat([x, self.feature.apply(x), self.feature.apply_random(x, masks)])
        out = self.model(batch)
        return out.reshape(3, len(x), *out.shape[1:]).transpose(0, 1)


def _split(y_pred: torch.Tensor | np.ndarray) -> tuple[Any, Any, Any]:
    arr = torch.as_tensor(y_pred).detach().cpu().double()
    if arr.ndim != 3 or arr.shape[1] != 3:
        raise ValueError(
            f"memorisation outputs must be (N, 3, K) [clean, unique, random], got "
            f"{tuple(arr.shape)}; wrap the model in FeatureProbe"
        )
    return arr[:, 0], arr[:, 1], arr[:, 2]


def compute_memorisation_metric(
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


class MemorisationMetric(CumulativeIterationMetric):
    """Accumulates d_u^i and d_r^i over an evaluation and aggregates M (Eq. 1).

    Each batch's ``y_pred`` is ``(B, 3, K)`` (from :class:`FeatureProbe`); ``y`` is
    ignored (probes are out of distribution). ``aggregate`` returns M and keeps the
    full :class:`~monai_forget.memorisation.MemorisationScore` in ``last_score``.

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


class MemorisationScoreHandler(IgniteMetricHandler):
    """Ignite handler computing M over an evaluation of :class:`FeatureProbe` outputs.

    The M value lands in ``engine.state.metrics`` under the name it is attached with;
    ``handler.metric_fn.last_score`` holds the tests.

    Args:
        from_logits: the evaluator's ``pred`` holds logits (FeatureProbe's default).
        test: primary one-tailed test (default the paper's Student t-test).
        output_transform: extracts ``(y_pred, y)`` from ``engine.state.output``.
        save_details: store the per-probe (d_u, d_r) buffer in ``engine.state.metric_details``.
    """

    def __init__(
        self,
        from_logits: bool = True,
        test: str = PAPER_TEST,
        output_transform: Callable = _DEFAULT_OUTPUT,
        save_details: bool = False,
    ) -> None:
        metric = MemorisationMetric(from_logits=from_logits, test=test)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )

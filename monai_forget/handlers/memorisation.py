"""Ignite handlers for unique-feature memorisation (Hartley & Tsaftaris 2022, Eq. 1).

- :class:`UniqueFeatureMemorisation`: M over an evaluation of
  :class:`~monai_forget.memorisation.FeatureProbe` outputs (a MONAI metric handler).
- :class:`MemorisationTracker`: M at every epoch end of training (Fig. 3c).
- :class:`CheckpointRecorder`: the checkpoints TracInCP self-influence needs
  (:func:`~monai_forget.memorisation.self_influence`, App. A.5).

The paper's Figure 3c follows M over the epochs of training and finds that memorisation
of a unique feature begins early, long before the validation loss stops improving.
:class:`MemorisationTracker` reproduces that measurement for any MONAI
``SupervisedTrainer``: attached to the trainer, it computes M for a given feature on a
fixed probe set (with the same random controls every epoch, so the curve is comparable
across epochs), stores it in ``engine.state.metrics`` and logs it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from monai.handlers import IgniteMetricHandler
from monai.handlers.utils import from_engine

from monai_forget.checks import check_parameter
from monai_forget.memorisation.feature import RandomFeature, UniqueFeature, as_probe_images
from monai_forget.memorisation.score import MemorisationScore, memorisation_score
from monai_forget.memorisation.settings import ProbeSettings
from monai_forget.memorisation.significance import PAPER_TEST
from monai_forget.memorisation.tracin import Checkpoint
from monai_forget.metrics.memorisation import UniqueFeatureMemorisationMetric

__all__ = ["CheckpointRecorder", "EpochScore", "MemorisationTracker", "UniqueFeatureMemorisation"]

_DEFAULT_OUTPUT = from_engine(["pred", "label"])


class UniqueFeatureMemorisation(IgniteMetricHandler):
    """Ignite handler computing M over an evaluation of ``FeatureProbe`` outputs.

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
        metric = UniqueFeatureMemorisationMetric(from_logits=from_logits, test=test)
        super().__init__(
            metric_fn=metric, output_transform=output_transform, save_details=save_details
        )


@dataclass(frozen=True)
class EpochScore:
    """M after one epoch."""

    epoch: int
    iteration: int
    score: MemorisationScore


class MemorisationTracker:
    """Computes and logs M for ``feature`` at each (``every``-th) epoch end of a trainer.

    Args:
        probes: fixed out-of-distribution probe set D_c ``(N, C, H, W)``.
        feature: the unique feature z_u to track.
        test: primary one-tailed test (default the paper's).
        tests: tests to run (default: only ``test``, to keep each epoch cheap).
        random_feature: ``"patch"`` (the paper's), ``"ink"`` or ``"text"`` controls.
        seed: seed of the random controls, identical at every epoch.
        every: compute every this many epochs.
        batch_size: probes per forward pass.
        name: key in ``engine.state.metrics``; the p-value goes under ``name + "_p"``.
        logger_name: logger to report to (default ``monai_forget.memorisation``).

    Attributes:
        history: one :class:`EpochScore` per computation, in order.
    """

    def __init__(
        self,
        probes: object,
        feature: UniqueFeature,
        *,
        test: str = PAPER_TEST,
        tests: Sequence[str] | None = None,
        random_feature: RandomFeature = "patch",
        seed: int = 0,
        every: int = 1,
        batch_size: int = 256,
        name: str = "memorisation_M",
        logger_name: str = "monai_forget.memorisation",
    ) -> None:
        check_parameter("every", every)
        self.probes = as_probe_images(probes).copy()
        feature.check_fits(self.probes.shape)
        self.feature = feature
        # checked now, not at the first epoch's end; the device is the engine's
        self.settings = ProbeSettings(
            test=test, random_feature=random_feature, seed=seed, batch_size=batch_size
        )
        self.tests = tuple(tests) if tests is not None else (test,)
        self.every = every
        self.name = name
        self.logger = logging.getLogger(logger_name)
        self.history: list[EpochScore] = []

    def attach(self, engine) -> None:
        """Register on ``engine`` (a MONAI ``SupervisedTrainer`` or any ignite engine)."""
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_COMPLETED(every=self.every), self)

    def __call__(self, engine) -> None:
        device = getattr(engine.state, "device", None) or torch.device("cpu")
        settings = replace(self.settings, device=device)
        score = memorisation_score(
            engine.network, self.probes, self.feature, settings, tests=self.tests
        )
        epoch = int(engine.state.epoch)
        self.history.append(EpochScore(epoch, int(engine.state.iteration), score))
        engine.state.metrics[self.name] = score.m
        engine.state.metrics[f"{self.name}_p"] = score.pvalue
        self.logger.info(
            "epoch %d: M = %.6g nats, %s p = %.4g (%d probes)",
            epoch,
            score.m,
            self.settings.test,
            score.pvalue,
            score.n,
        )

    def curve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(epochs, M, p)`` arrays of the history (Fig. 3c of the paper)."""
        epochs = np.array([h.epoch for h in self.history], dtype=np.int64)
        m = np.array([h.score.m for h in self.history], dtype=np.float64)
        p = np.array([h.score.pvalue for h in self.history], dtype=np.float64)
        return epochs, m, p


class CheckpointRecorder:
    """Ignite handler keeping TracInCP checkpoints (weights + learning rate) in memory.

    Attach to a MONAI ``SupervisedTrainer``; at every ``every``-th epoch end it copies
    the network's state dict, the optimiser's current learning rate (first parameter
    group) and the epoch's mean training loss into :attr:`checkpoints`.
    """

    def __init__(self, every: int = 1) -> None:
        check_parameter("every", every)
        self.every = every
        self.checkpoints: list[Checkpoint] = []
        self._loss_sum, self._count = 0.0, 0

    def attach(self, engine) -> None:
        from ignite.engine import Events

        engine.add_event_handler(Events.ITERATION_COMPLETED, self._accumulate)
        engine.add_event_handler(Events.EPOCH_COMPLETED(every=self.every), self)

    def _accumulate(self, engine) -> None:
        output = engine.state.output
        if isinstance(output, Mapping) and "loss" in output:
            n = len(output["label"]) if "label" in output else 1
            self._loss_sum += float(torch.as_tensor(output["loss"]).detach()) * n
            self._count += n

    def __call__(self, engine) -> None:
        state = {k: v.detach().cpu().clone() for k, v in engine.network.state_dict().items()}
        lr = float(engine.optimizer.param_groups[0]["lr"])
        loss = self._loss_sum / self._count if self._count else float("nan")
        self._loss_sum, self._count = 0.0, 0
        self.checkpoints.append(Checkpoint(state, lr, int(engine.state.epoch), loss))

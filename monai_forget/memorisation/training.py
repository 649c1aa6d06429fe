"""Training with early stopping on a validation split (Hartley & Tsaftaris 2022, App. A.2).

The paper trains its reference networks until the validation loss stops improving, to
show that memorisation of a unique feature survives the usual guard against
overfitting: Adam, cross-entropy, up to 500 epochs with a patience of 10, the weights of
the lowest validation loss kept (App. A.2), learning rate 3e-4 and batch size 128 (512
for CNN-2, App. A.3); these are the defaults (:meth:`EarlyStoppingTraining.paper`).
:class:`EarlyStoppingTraining` does this with MONAI's
``SupervisedTrainer`` (cross-entropy, Adam), a ``SupervisedEvaluator`` run on the
validation split by MONAI's ``ValidationHandler`` after every epoch, and ignite's
``EarlyStopping`` on the validation loss. With ``restore_best`` the weights of the best
validation epoch are put back at the end.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from monai_forget.checks import COUNT, check_in
from monai_forget.data import LabelledImages
from monai_forget.networks import get_network

__all__ = ["EarlyStoppingTraining", "TrainingLog"]


@dataclass
class TrainingLog:
    """What happened in one run: validation losses per epoch and where it stopped."""

    val_losses: list[float] = field(default_factory=list)
    best_epoch: int = 0
    epochs_run: int = 0

    @property
    def best_val_loss(self) -> float:
        return min(self.val_losses) if self.val_losses else float("nan")


class _KeepBest:
    """Copies the network's weights whenever the validation loss reaches a new minimum."""

    def __init__(self, network: nn.Module, trainer, log: TrainingLog) -> None:
        self.network = network
        self.trainer = trainer
        self.log = log
        self.best_state: dict[str, torch.Tensor] | None = None

    def __call__(self, evaluator) -> None:
        loss = float(evaluator.state.metrics["val_loss"])
        self.log.val_losses.append(loss)
        if loss <= self.log.best_val_loss:
            self.log.best_epoch = int(self.trainer.state.epoch)
            self.best_state = copy.deepcopy(self.network.state_dict())


@dataclass(frozen=True)
class EarlyStoppingTraining:
    """A registry network trained with Adam on cross-entropy, early-stopped on validation loss.

    Args:
        network: name for :func:`monai_forget.networks.get_network` (e.g. ``"mlp-1"``).
        network_args: its keyword arguments.
        max_epochs: upper bound on epochs.
        patience: epochs without a lower validation loss before stopping (ignite
            ``EarlyStopping``).
        min_delta: improvement smaller than this does not count.
        batch_size: mini-batch size (batches shuffled with a generator seeded per run).
        learning_rate: Adam's step size.
        weight_decay: L2 penalty.
        restore_best: put back the weights of the best validation epoch at the end.
    """

    network: str
    network_args: Mapping[str, Any] = field(default_factory=dict)
    max_epochs: int = 500
    patience: int = 10
    min_delta: float = 0.0
    batch_size: int = 128
    learning_rate: float = 3e-4
    weight_decay: float = 0.0
    restore_best: bool = True

    def __post_init__(self) -> None:
        for name in ("max_epochs", "patience", "batch_size"):
            check_in(name, getattr(self, name), COUNT)

    @classmethod
    def paper(cls, network: str, network_args: Mapping[str, Any] | None = None, **kwargs: Any):
        """The paper's training of ``network`` (App. A.2/A.3): batch 512 for CNN-2, else 128."""
        batch = 512 if network.strip().lower().replace("_", "-") == "cnn-2" else 128
        return cls(network, dict(network_args or {}), **{"batch_size": batch, **kwargs})

    def build(self) -> nn.Module:
        """A freshly initialised network (seed the RNG first for reproducibility)."""
        return get_network(self.network, **dict(self.network_args))

    def fit(
        self,
        model: nn.Module,
        train: LabelledImages,
        validation: LabelledImages,
        *,
        seed: int = 0,
        device: str | torch.device = "cpu",
        handlers: Sequence[Any] = (),
    ) -> TrainingLog:
        """Train ``model`` in place; returns the :class:`TrainingLog`.

        Args:
            model: the network to train.
            train: training set (e.g. with a canary injected).
            validation: validation split for early stopping (disjoint from ``train``).
            seed: seeds the batch order; the caller seeds initialisation.
            device: where to train.
            handlers: extra handlers with ``attach(trainer)`` (e.g.
                :class:`~monai_forget.handlers.CheckpointRecorder`,
                :class:`~monai_forget.memorisation.MemorisationTracker`).
        """
        from ignite.engine import Events
        from ignite.handlers import EarlyStopping
        from ignite.metrics import Loss
        from monai.engines import SupervisedEvaluator, SupervisedTrainer
        from monai.handlers import ValidationHandler
        from monai.handlers.utils import from_engine

        if len(train) == 0 or len(validation) == 0:
            raise ValueError("training and validation sets must both be non-empty")
        device = torch.device(device)
        model.to(device)
        generator = torch.Generator().manual_seed(int(seed))
        train_loader = torch.utils.data.DataLoader(
            train.to_dataset(), self.batch_size, shuffle=True, generator=generator
        )
        val_loader = torch.utils.data.DataLoader(validation.to_dataset(), 512)
        loss_fn = nn.CrossEntropyLoss()
        evaluator = SupervisedEvaluator(
            device=device,
            val_data_loader=val_loader,
            network=model,
            key_val_metric={
                "val_loss": Loss(loss_fn, output_transform=from_engine(["pred", "label"]))
            },
            metric_cmp_fn=_lower_is_better,
            decollate=False,
        )
        trainer = SupervisedTrainer(
            device=device,
            max_epochs=self.max_epochs,
            train_data_loader=train_loader,
            network=model,
            optimizer=torch.optim.Adam(
                model.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay
            ),
            loss_function=loss_fn,
            decollate=False,
        )
        log = TrainingLog()
        keep = _KeepBest(model, trainer, log)
        evaluator.add_event_handler(Events.EPOCH_COMPLETED, keep)
        stopper = EarlyStopping(
            patience=self.patience,
            score_function=lambda engine: -float(engine.state.metrics["val_loss"]),
            trainer=trainer,
            min_delta=self.min_delta,
        )
        evaluator.add_event_handler(Events.COMPLETED, stopper)
        stopper.logger.disabled = True  # "EarlyStopping: Stop training" is not a warning here
        ValidationHandler(validator=evaluator, interval=1, epoch_level=True).attach(trainer)
        for handler in handlers:
            handler.attach(trainer)
        trainer.run()
        log.epochs_run = int(trainer.state.epoch)
        if self.restore_best and keep.best_state is not None:
            model.load_state_dict(keep.best_state)
        model.eval()
        return log

    def train(
        self,
        train: LabelledImages,
        validation: LabelledImages,
        *,
        seed: int = 0,
        device: str | torch.device = "cpu",
        handlers: Sequence[Any] = (),
    ) -> tuple[nn.Module, TrainingLog]:
        """Build and train a network with ``seed``, without touching the global RNG.

        Initialisation, batch order and dropout are all drawn from a forked torch RNG
        seeded with ``seed``, so a canary model and its control trained with the same
        seed differ only by the canary.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = self.build()
            log = self.fit(model, train, validation, seed=seed, device=device, handlers=handlers)
        return model, log


def _lower_is_better(current: float, best: float) -> bool:
    # MONAI starts best_metric at -1; any loss beats that placeholder.
    return best < 0 or current < best

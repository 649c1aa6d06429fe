"""Shadow models "with the same design" as the target, trained from a recipe.

Both withdrawal auditors assume the auditor knows how the target was trained (Liu &
Tsaftaris 2020, Sec. 3: "the same design"; Huang et al. 2021, Sec. 3.1) and trains
reference models that way on data it controls. A :class:`Recipe` captures that design:

- :class:`SupervisedRecipe`: a network from the registry trained with MONAI's
  ``SupervisedTrainer`` (cross-entropy, Adam or SGD), fully described by its fields.
- :class:`BundleRecipe`: a MONAI bundle training config whose trainer is run with the
  auditor's data in place of the bundle's dataset.
- :class:`CallableRecipe`: any pair of Python callables (build, fit).

:func:`load_recipe` reads one from the command line's ``--recipe``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from monai_forget.checks import COUNT, check_choice, check_in
from monai_forget.data import LabelledImages
from monai_forget.networks import get_network

#: True while a ``ShadowTrainer(progress=True)`` trains: MONAI trainers show a progress bar.
_PROGRESS: ContextVar[bool] = ContextVar("monai_forget_shadow_progress", default=False)


def _attach_progress(trainer: Any) -> None:
    """Show the training's iterations as a progress bar when a ShadowTrainer asks for it."""
    if _PROGRESS.get():
        from ignite.handlers import ProgressBar

        ProgressBar(persist=False, desc="shadow model").attach(trainer)


@runtime_checkable
class Recipe(Protocol):
    """How the target model was trained: an architecture and a training procedure."""

    @property
    def name(self) -> str:
        """A stable identity of the design; it keys the shadow-model cache."""
        ...

    def build(self) -> nn.Module:
        """Return a freshly initialised network (the RNG is seeded by the caller)."""
        ...

    def fit(
        self, model: nn.Module, data: LabelledImages, *, seed: int, device: torch.device
    ) -> None:
        """Train ``model`` in place on ``data``."""
        ...


@dataclass(frozen=True)
class SupervisedRecipe:
    """A registry network trained with MONAI's ``SupervisedTrainer`` on cross-entropy.

    Args:
        network: name understood by :func:`monai_forget.networks.get_network`.
        network_args: keyword arguments of that network.
        epochs: passes over the training data (ignored when ``steps`` is set).
        steps: train for exactly this many mini-batch updates, whatever the data size,
            so models trained on sets of different sizes get the same optimisation budget.
        batch_size: mini-batch size; batches are shuffled with a generator seeded per run.
        learning_rate: optimiser step size.
        optimizer: ``"adam"`` or ``"sgd"``.
        betas: Adam's coefficients (Liu & Tsaftaris 2020 Sec. 4.2 use (0.5, 0.999)).
        momentum: SGD momentum.
        weight_decay: L2 penalty.
        amp: train with automatic mixed precision (MONAI's ``SupervisedTrainer(amp=True)``:
            float16 autocast and a gradient scaler); CUDA devices only. A recipe with it is
            another design (its models are cached apart); scoring stays in float32.
    """

    network: str
    network_args: Mapping[str, Any] = field(default_factory=dict)
    epochs: int = 30
    steps: int | None = None
    batch_size: int = 64
    learning_rate: float = 1e-3
    optimizer: str = "adam"
    betas: tuple[float, float] = (0.9, 0.999)
    momentum: float = 0.9
    weight_decay: float = 0.0
    amp: bool = False

    def __post_init__(self) -> None:
        check_choice("optimizer", self.optimizer, ("adam", "sgd"))
        for name in ("epochs", "steps", "batch_size"):
            if getattr(self, name) is not None:
                check_in(name, getattr(self, name), COUNT)

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> SupervisedRecipe:
        """Build from a JSON-style mapping (unknown keys are an error, not ignored)."""
        known = set(cls.__dataclass_fields__)
        unknown = set(spec) - known
        if unknown:
            raise ValueError(f"unknown recipe keys {sorted(unknown)}; allowed: {sorted(known)}")
        spec = dict(spec)
        if "betas" in spec:
            spec["betas"] = tuple(spec["betas"])
        return cls(**spec)

    @property
    def name(self) -> str:
        spec = asdict(self)
        if not self.amp:  # the name recipes had before the option: their caches stay valid
            del spec["amp"]
        return "supervised:" + json.dumps(spec, sort_keys=True, default=list)

    def build(self) -> nn.Module:
        return get_network(self.network, **dict(self.network_args))

    def check_device(self, device: str | torch.device) -> None:
        """Refuse a device this recipe cannot train on (mixed precision needs CUDA).

        Raises:
            ValueError: ``amp`` on a device that is not CUDA.
        """
        if self.amp and torch.device(device).type != "cuda":
            raise ValueError(
                f"the recipe trains with mixed precision (amp), which needs a CUDA device, "
                f'not {device}: train on cuda:N, or drop "amp" from the recipe'
            )

    def make_optimizer(self, params: Iterable[torch.Tensor]) -> torch.optim.Optimizer:
        """The recipe's optimiser over ``params`` (a model's, or a group's stacked ones)."""
        if self.optimizer == "adam":
            return torch.optim.Adam(
                params, lr=self.learning_rate, betas=self.betas, weight_decay=self.weight_decay
            )
        return torch.optim.SGD(
            params, lr=self.learning_rate, momentum=self.momentum, weight_decay=self.weight_decay
        )

    def fit(
        self, model: nn.Module, data: LabelledImages, *, seed: int, device: torch.device
    ) -> None:
        from monai.engines import SupervisedTrainer

        self.check_device(device)
        dataset = data.to_dataset()
        generator = torch.Generator().manual_seed(seed)
        epochs = self.epochs
        if self.steps is not None:
            # One "epoch" of exactly `steps` batches drawn from repeated reshuffles.
            sampler = torch.utils.data.RandomSampler(
                dataset, num_samples=self.steps * self.batch_size, generator=generator
            )
            loader = torch.utils.data.DataLoader(dataset, self.batch_size, sampler=sampler)
            epochs = 1
        else:
            loader = torch.utils.data.DataLoader(
                dataset, self.batch_size, shuffle=True, generator=generator
            )
        trainer = SupervisedTrainer(
            device=device,
            max_epochs=epochs,
            train_data_loader=loader,
            network=model.to(device),
            optimizer=self.make_optimizer(model.parameters()),
            loss_function=nn.CrossEntropyLoss(),
            amp=self.amp,
        )
        _attach_progress(trainer)
        trainer.run()


@dataclass(frozen=True)
class CallableRecipe:
    """A recipe from two callables: ``build() -> nn.Module`` and ``fit(model, data, seed, device)``.

    Args:
        build: returns an untrained network of the target's architecture.
        fit: trains the network in place.
        name: stable identity (change it whenever the design changes, or the cache is stale).
    """

    build_fn: Callable[[], nn.Module]
    fit_fn: Callable[[nn.Module, LabelledImages, int, torch.device], None]
    name: str

    def build(self) -> nn.Module:
        return self.build_fn()

    def fit(
        self, model: nn.Module, data: LabelledImages, *, seed: int, device: torch.device
    ) -> None:
        self.fit_fn(model, data, seed, device)


@dataclass(frozen=True)
class BundleRecipe:
    """A MONAI bundle training config run with the auditor's data.

    The config is parsed with ``monai.bundle.ConfigParser``; the dataset at
    ``dataset_key`` is replaced by the shadow training set (MONAI-style dicts with
    ``image`` and ``label``), ``device_key`` is set to the requested device, and the
    ``SupervisedTrainer`` at ``trainer_key`` is run. Its network (``network_key``) is the
    model that gets trained, so :meth:`build` returns a fresh instance of it.

    Args:
        config_file: path to the bundle's ``train.json`` (or YAML).
        trainer_key: config id of the trainer.
        network_key: config id of the network definition.
        dataset_key: config id of the training dataset to replace.
        device_key: config id of the device, or ``None`` when the config has none.
        overrides: extra ``{id: value}`` settings (for example fewer epochs).
        transform_key: config id of a transform applied to each in-memory training
            sample (the config's random augmentation, e.g. ``"train#augmentation"``);
            ``None``: the samples are used as they are. The dataset at ``dataset_key``
            is replaced, so its preprocessing is lost unless named here.
        disabled_keys: config ids emptied (set to ``[]``) when present: by default the
            bundles' validation handlers (whose ``CheckpointSaver`` would write the
            bundle's model file; a shadow model keeps its last epoch) and ``train#writers``
            (TensorBoard logs), so a shadow model writes nothing into the bundle.

    The config is code (its ``$`` expressions are evaluated): trust it as a script.
    """

    config_file: str
    trainer_key: str = "train#trainer"
    network_key: str = "network_def"
    dataset_key: str = "train#dataset"
    device_key: str | None = "device"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    transform_key: str | None = None
    disabled_keys: tuple[str, ...] = ("train#validation", "train#writers")

    def _parser(self):
        from monai.bundle import ConfigParser

        parser = ConfigParser()
        parser.read_config(self.config_file)
        for key in self.disabled_keys:
            if key in parser:
                parser[key] = []
        for key, value in self.overrides.items():
            parser[key] = value
        return parser

    @property
    def name(self) -> str:
        content = Path(self.config_file).read_bytes()
        spec = json.dumps(
            [self.trainer_key, self.network_key, self.dataset_key, dict(self.overrides)]
            + ([self.transform_key] if self.transform_key is not None else [])
            + [list(self.disabled_keys)],
            sort_keys=True,
            default=str,
        )
        return "bundle:" + hashlib.sha256(content + spec.encode()).hexdigest()

    def build(self) -> nn.Module:
        return self._parser().get_parsed_content(self.network_key, instantiate=True)

    def fit(
        self, model: nn.Module, data: LabelledImages, *, seed: int, device: torch.device
    ) -> None:
        parser = self._parser()
        transform = None
        if self.transform_key is not None:
            transform = parser.get_parsed_content(self.transform_key, instantiate=True)
        parser[self.dataset_key] = data.to_dataset(transform)
        if self.device_key is not None:
            parser[self.device_key] = device
        # Train the given instance: the trainer's network, optimiser and handlers must
        # all refer to it, so it replaces the network definition before parsing.
        parser[self.network_key] = model.to(device)
        trainer = parser.get_parsed_content(self.trainer_key, instantiate=True)
        _attach_progress(trainer)
        torch.manual_seed(seed)
        trainer.run()

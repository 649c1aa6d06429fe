"""What the ACDC segmentation bundle's configs call beyond MONAI: resuming, the
patient-level sets of a withdrawal audit, shadow models trained by the bundle itself,
and the setup its two withdrawal audits share.

A withdrawal audit compares the audited model with shadow models trained "with the
same design" (Liu & Tsaftaris 2020). For a segmentation bundle the design is its
``train.json`` (and profile), so :class:`BundleShadowTrainer` runs exactly that config
on a datalist holding only the shadow's patients, and caches the weights under the
content of the configs, the overrides, the entries and the seed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from monai_forget.bundles.weights import load_weights
from monai_forget.cache import entry_hash, entry_lock, record_entry
from monai_forget.checks import check_choice, check_fraction
from monai_forget.io import atomic_write
from monai_forget.segmentation import SCORE_NAMES, LabelledSlices, SegmentationScores, score_model

__all__ = [
    "CHECKPOINT_SELECTIONS",
    "BestValidation",
    "BundleShadowTrainer",
    "SegmentationAuditSetup",
    "check_checkpoint_selection",
    "labelled_slices",
    "latest_checkpoint",
    "split_by_patient",
    "warn_if_selected_on_validation",
]

#: ``CheckpointSaver``'s name for an epoch's checkpoint: ``<prefix>_checkpoint_epoch=<n>.pt``
_STEP = re.compile(r"_epoch=(\d+)\.pt$")


def latest_checkpoint(folder: str | os.PathLike) -> str:
    """The newest ``CheckpointSaver`` file in ``folder`` (highest epoch), to resume from.

    Raises:
        FileNotFoundError: no checkpoint in ``folder`` (nothing to resume: train without
            ``--resume``).
    """
    found = []
    for path in Path(folder).glob("*.pt") if Path(folder).is_dir() else ():
        match = _STEP.search(path.name)
        if match:
            found.append((int(match.group(1)), path))
    if not found:
        raise FileNotFoundError(
            f"no checkpoint to resume from in {folder}; train without --resume True"
        )
    return str(max(found)[1])


#: What ``train.json``'s ``checkpoint_selection`` may be: the last epoch (the default, the
#: design the withdrawal audit's reference models reproduce) or the best validation epoch.
CHECKPOINT_SELECTIONS = ("last", "best")


def check_checkpoint_selection(selection: str, val_interval: int, epochs: int) -> None:
    """Refuse a ``checkpoint_selection`` the run cannot honour, before it trains.

    Raises:
        ValueError: an unknown selection, or "best" with no validation in the run.
    """
    check_choice("checkpoint_selection", selection, CHECKPOINT_SELECTIONS)
    if selection == "best" and int(val_interval) > int(epochs):
        raise ValueError(
            f"checkpoint_selection 'best' needs a validation, but val_interval {val_interval} "
            f"> epochs {epochs}: lower --val_interval or keep the last epoch"
        )


def warn_if_selected_on_validation(ckpt: str | os.PathLike) -> bool:
    """Warn when ``ckpt``'s training summary (``<stem>_train.json`` beside it) says the
    model is the best validation epoch; returns whether it warned.

    The withdrawal audit uses the validation patients as known non-members and trains
    its reference models without validation: a model chosen on those patients is not
    trained like its references, which pushes the audit toward "forgotten".
    """
    summary = Path(ckpt).with_name(Path(ckpt).stem + "_train.json")
    try:
        selection = json.loads(summary.read_text())["checkpoint"]["selection"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no summary (a model trained elsewhere): nothing to check
    if selection != "best":
        return False
    warnings.warn(
        f"{Path(ckpt).name} is the best validation epoch ({summary.name}): it was chosen on "
        "the validation patients the audit uses as known non-members, and the reference "
        "models keep their last epoch, so the audit leans toward 'forgotten'; audit a model "
        "trained with --checkpoint_selection last",
        UserWarning,
        stacklevel=2,
    )
    return True


class BestValidation:
    """The best validation epoch so far, kept in the resumable checkpoint.

    With ``checkpoint_selection`` "best", ``models/model.pt`` is rewritten whenever the
    validation Dice improves. A run resumed without this state would take its first
    validation as the best and overwrite a better model; with it, the key-metric saver
    and the evaluator's best metric and epoch continue from where the run stopped.

    Args:
        evaluator: the validation ``SupervisedEvaluator``.
        saver: the ``CheckpointSaver`` with ``save_key_metric`` that writes the model.
    """

    def __init__(self, evaluator: Any, saver: Any) -> None:
        self.evaluator = evaluator
        # MONAI keeps the key-metric tracking in this ignite Checkpoint; its public route
        # (key_metric_save_state) would store it inside model.pt itself
        self.tracking = saver._key_metric_checkpoint

    def state_dict(self) -> dict[str, Any]:
        state = self.evaluator.state
        return {
            "best_metric": float(state.best_metric),
            "best_metric_epoch": int(state.best_metric_epoch),
            "saved": self.tracking.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.evaluator.state.best_metric = float(state["best_metric"])
        self.evaluator.state.best_metric_epoch = int(state["best_metric_epoch"])
        self.tracking.load_state_dict(state["saved"])


def split_by_patient(
    entries: Sequence[Mapping[str, Any]], fraction: float = 0.5, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split entries into (members, non-members) by patient, stratified by ``label``.

    Within each class, a seeded ``fraction`` of the patients (rounded, at least one
    when the class has two or more) goes to the members; every entry of a patient goes
    with it.

    Raises:
        ValueError: a fraction outside (0, 1) or fewer than two patients.
    """
    check_fraction("fraction", fraction)
    by_class: dict[int, list[str]] = defaultdict(list)
    for e in entries:
        patients = by_class[int(e["label"])]
        if e["patient"] not in patients:
            patients.append(str(e["patient"]))
    if sum(len(p) for p in by_class.values()) < 2:
        raise ValueError("splitting by patient needs at least two patients")
    rng = np.random.default_rng(seed)
    members: set[str] = set()
    for label in sorted(by_class):
        patients = sorted(by_class[label])
        k = round(fraction * len(patients))
        k = min(max(k, 1 if len(patients) > 1 else 0), len(patients) - (len(patients) > 1))
        members.update(patients[i] for i in rng.permutation(len(patients))[:k])
    inside = [dict(e) for e in entries if e["patient"] in members]
    outside = [dict(e) for e in entries if e["patient"] not in members]
    return inside, outside


def labelled_slices(
    entries: Sequence[Mapping[str, Any]], transform: Callable[[dict[str, Any]], Mapping]
) -> LabelledSlices:
    """Slice entries through the bundle's deterministic loading (``image``, ``label``)."""
    if not entries:
        raise ValueError("no datalist entries to load")
    return LabelledSlices.from_samples(transform(dict(e)) for e in entries)


class BundleShadowTrainer:
    """Train shadow models with the bundle's own ``train.json``, cached on disk.

    Args:
        config_files: the training configs, in overlay order (``train.json`` and the
            profile, e.g. ``cpu.json``).
        overrides: the settings the audited model was trained with (e.g. ``epochs``).
        cache_dir: where the shadow weights and their datalists are kept.
        validation_entries: the validation section written into each shadow's
            datalist (never evaluated: shadows train without validation).
        seed: the training seed.
    """

    def __init__(
        self,
        config_files: Sequence[str],
        overrides: Mapping[str, Any] | None = None,
        cache_dir: str | os.PathLike = "cache",
        validation_entries: Sequence[Mapping[str, Any]] = (),
        seed: int = 0,
    ) -> None:
        self.config_files = [str(Path(f).resolve()) for f in config_files]
        self.overrides = dict(overrides or {})
        self.cache_dir = Path(cache_dir) / "segmentation_shadows"
        self.validation_entries = [_plain(e) for e in validation_entries]
        self.seed = int(seed)

    def key(self, entries: Sequence[Mapping[str, Any]]) -> str:
        """The cache key: configs' content, overrides, training entries and seed."""
        h = hashlib.sha256()
        for path in self.config_files:
            h.update(Path(path).read_bytes())
        payload = {"overrides": self.overrides, "seed": self.seed, "entries": entries}
        h.update(json.dumps(payload, sort_keys=True, default=str).encode())
        return h.hexdigest()[:24]

    def train(self, entries: Sequence[Mapping[str, Any]], name: str = "shadow") -> Path:
        """Weights of the bundle trained on ``entries`` (trained unless cached).

        Returns:
            The ``.pt`` state dict written by the bundle's ``train.json``.

        Raises:
            CacheEntryError: the cached checkpoint is damaged or replaced.
        """
        plain = [_plain(e) for e in entries]
        key = self.key(plain)
        ckpt = self.cache_dir / f"{key}.pt"
        with entry_lock(ckpt):
            if ckpt.is_file():
                entry_hash(ckpt)  # refuses a damaged or replaced checkpoint
                return ckpt
            try:
                self._run(plain, key, ckpt, name)
            except BaseException:
                # the bundle may have saved the weights before a later step failed: an
                # unrecorded entry would be refused next time, so none is left
                ckpt.unlink(missing_ok=True)
                raise
            record_entry(ckpt)
        return ckpt

    def _run(self, plain: list[dict[str, Any]], key: str, ckpt: Path, name: str) -> None:
        from monai.bundle import run

        datalist = self.cache_dir / f"{key}.json"
        with atomic_write(datalist, "w", overwrite=True) as handle:
            json.dump({"training": plain, "validation": self.validation_entries}, handle)
        print(f"training {name} ({len(plain)} slices) -> {ckpt}")
        settings = {
            **self.overrides,
            "data_file": str(datalist),
            "ckpt_file": str(ckpt),
            "seed": self.seed,
            "resume": any((self.cache_dir / f"{key}_resume").glob("*.pt")),
            # shadows keep their last epoch and write no TensorBoard logs (the
            # evaluator's writer would open its folder even though it never runs)
            "train#validation": [],
            "train#writers": [],
            "validate#handlers": [],
            "checkpoint_selection": "last",
        }
        run(config_file=self.config_files, **settings)


def _plain(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-ready copy of an entry with absolute paths."""
    out = {}
    for key, value in entry.items():
        if key in ("image", "seg") and isinstance(value, (str, os.PathLike)):
            value = str(Path(value).resolve())
        out[key] = value
    return out


@dataclass(frozen=True)
class SegmentationAuditSetup:
    """What both withdrawal audits of one provider share (``audit.json``'s
    ``audit_setup``): the audited model, how slices load and are scored, how shadow or
    reference models train, and where the results go.

    Args:
        network: builds a fresh network (a ``_mode_: callable`` config item).
        target_ckpt: the audited model's weights.
        loading: the bundle's deterministic loading (entry -> ``image``, ``label``).
        trainer: trains the shadow or reference models with the bundle's design.
        output_dir: where the results go.
        provider: the provider's name.
        scenario: free text naming the audited model.
        score: the per-slice score the decisions use
            (:data:`~monai_forget.segmentation.SCORE_NAMES`).
        roi_size: inference window (padded whole-slice inference).
        device: torch device.
        cache_dir: per-slice score cache.
        overwrite: replace existing outputs.

    Raises:
        ValueError: an unknown score.
    """

    network: Callable[[], nn.Module]
    target_ckpt: str | os.PathLike
    loading: Callable[[dict[str, Any]], Mapping]
    trainer: BundleShadowTrainer
    output_dir: str | os.PathLike
    provider: str
    scenario: str = ""
    score: str = "foreground_confidence"
    roi_size: Sequence[int] = (256, 256)
    device: Any = "cpu"
    cache_dir: str | os.PathLike | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        check_choice("score", self.score, SCORE_NAMES)
        # frozen: normalised through object.__setattr__, once
        object.__setattr__(self, "target_ckpt", Path(self.target_ckpt))
        object.__setattr__(self, "output_dir", Path(self.output_dir))
        object.__setattr__(self, "provider", str(self.provider))
        object.__setattr__(self, "roi_size", tuple(self.roi_size))
        object.__setattr__(self, "overwrite", bool(self.overwrite))
        warn_if_selected_on_validation(self.target_ckpt)

    @property
    def label(self) -> str:
        """The audited model as the reports name it."""
        return f"provider {self.provider}" + (f", {self.scenario}" if self.scenario else "")

    def load(self, path: str | os.PathLike | None = None) -> nn.Module:
        """A fresh network with the weights at ``path`` (default: the audited model's)."""
        return load_weights(self.network(), path or self.target_ckpt, self.device)

    def train(self, entries: Sequence[Mapping[str, Any]], name: str) -> nn.Module:
        """A model of the bundle's design trained (or reused) on ``entries``."""
        return self.load(self.trainer.train(entries, name))

    def slices(self, entries: Sequence[Mapping[str, Any]]) -> LabelledSlices:
        """``entries`` through the bundle's loading."""
        return labelled_slices(entries, self.loading)

    def scores(self, model: nn.Module, data: LabelledSlices) -> SegmentationScores:
        """``model``'s per-slice scores on ``data`` (cached under ``cache_dir``)."""
        return score_model(
            model, data, roi_size=self.roi_size, device=self.device, cache_dir=self.cache_dir
        )

"""What a bundle training run did, written as JSON next to the model."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from monai_forget.results import jsonable, to_json, write_json

__all__ = ["save_training_summary"]


def save_training_summary(
    path: str | os.PathLike,
    trainer: Any,
    evaluator: Any | None = None,
    datalist: Sequence[Mapping[str, Any]] | None = None,
    checkpoint: str | os.PathLike | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write what a bundle training run did to JSON: data, budget, times, last metrics,
    and which validation epoch the saved checkpoint is.

    Args:
        path: the JSON file (written atomically).
        trainer: the finished ``SupervisedTrainer``.
        evaluator: its validation evaluator, if any (last validation metrics, best epoch).
            ``checkpoint`` says which epoch the saved model is: the best validation
            epoch when ``checkpoint`` is given, else the last (the best is then
            recorded apart, under ``best_validation``).
        datalist: the training entries (counts per provider and class are recorded).
        checkpoint: the model file MONAI's ``CheckpointSaver`` wrote at the best
            validation epoch; it must exist.
        overwrite: replace an existing file.

    Raises:
        FileNotFoundError: ``checkpoint`` was not written (the validation never ran).
    """
    if checkpoint is not None and not Path(checkpoint).is_file():
        raise FileNotFoundError(
            f"no checkpoint was saved at {checkpoint}: the model is saved at the best "
            "validation epoch, and no validation ran (is val_interval above epochs?)"
        )
    state = trainer.state
    total = float(state.times.get("COMPLETED") or 0.0)
    record: dict[str, Any] = {
        "epochs": int(state.epoch),
        "iterations": int(state.iteration),
        "iterations_per_epoch": int(state.epoch_length or 0),
        "seconds_total": round(total, 2),
        "seconds_per_epoch": round(total / max(int(state.epoch), 1), 2),
        "train_metrics": {k: jsonable(v) for k, v in state.metrics.items()},
    }
    if evaluator is not None and evaluator.state is not None:
        record["validation_metrics"] = {k: jsonable(v) for k, v in evaluator.state.metrics.items()}
        best = {
            "epoch": int(getattr(evaluator.state, "best_metric_epoch", -1)),
            "key_metric": getattr(evaluator.state, "key_metric_name", None),
            "value": jsonable(getattr(evaluator.state, "best_metric", None)),
        }
        if checkpoint is not None:  # CheckpointSaver kept the best validation epoch
            record["checkpoint"] = {"file": str(checkpoint), "selection": "best", **best}
        else:  # the caller saves the last epoch's weights: say so, and keep the best apart
            record["checkpoint"] = {"file": None, "selection": "last", "epoch": int(state.epoch)}
            record["best_validation"] = best
    if datalist is not None:
        sites: dict[str, int] = defaultdict(int)
        labels: dict[str, int] = defaultdict(int)
        patients = set()
        for e in datalist:
            sites[str(e.get("site", "?"))] += 1
            labels[str(e.get("label", "?"))] += 1
            patients.add(str(e.get("patient", e.get("image"))))
        record["training_data"] = {
            "entries": len(datalist),
            "patients": len(patients),
            "entries_per_site": dict(sorted(sites.items())),
            "entries_per_label": dict(sorted(labels.items())),
        }
    write_json(path, record, overwrite=overwrite)
    print(to_json({k: v for k, v in record.items() if k != "training_data"}, indent=None))
    return record

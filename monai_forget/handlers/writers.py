"""Ignite handlers writing an evaluation's outputs: metrics (JSON) and per-sample
predictions (CSV), atomically and never over an existing file unless asked.

MONAI's ``MetricsSaver`` and ``ClassificationSaver`` were considered: the first writes
tensors as their ``repr`` and cannot record per-class names or the evaluation's context
(data, model, provider); the second keys rows by file name, so the many slices read
from one volume would collapse into one row, and it records neither the label nor the
predicted class. Neither writes atomically nor refuses to replace a file.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from monai_forget.io import atomic_write, check_writable
from monai_forget.results import jsonable, write_json

__all__ = ["MetricsWriter", "PredictionWriter"]


class MetricsWriter:
    """Write ``engine.state.metrics`` to a JSON file at the end of an evaluation.

    Tensors (e.g. per-class recall) become lists; ``class_names`` adds a
    ``<metric>_by_class`` mapping for every per-class metric. The file is written
    atomically; an existing file is refused at construction unless ``overwrite``.

    Args:
        path: the JSON file.
        class_names: names of the classes in index order.
        extra: constant fields to record with the metrics (data, model, provider, ...).
        overwrite: replace an existing file.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        class_names: Sequence[str] | None = None,
        extra: Mapping[str, Any] | None = None,
        overwrite: bool = False,
    ) -> None:
        self.path = check_writable(path, overwrite)
        self.class_names = list(class_names) if class_names is not None else None
        self.extra = dict(extra or {})
        self.overwrite = overwrite
        self.written: dict[str, Any] | None = None

    def attach(self, engine: Any) -> None:
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_COMPLETED, self)

    def __call__(self, engine: Any) -> None:
        metrics = {str(k): jsonable(v) for k, v in engine.state.metrics.items()}
        if self.class_names:
            for name, value in list(metrics.items()):
                if isinstance(value, list) and len(value) == len(self.class_names):
                    metrics[f"{name}_by_class"] = dict(zip(self.class_names, value, strict=True))
        record = {"metrics": metrics, **{k: jsonable(v) for k, v in self.extra.items()}}
        write_json(self.path, record, overwrite=self.overwrite)
        # A second epoch of the same engine rewrites its own file.
        self.overwrite = True
        self.written = record


#: Per-sample fields written beside the image, when the data has them.
ID_FIELDS = ("id", "patient", "frame", "slice")


def _scalar(value: Any) -> Any:
    """A plain value of a decollated field (a one-element tensor or array unwrapped)."""
    if isinstance(value, torch.Tensor | np.ndarray):
        return np.asarray(value).ravel()[0].item() if np.asarray(value).size == 1 else None
    return value


def _sample_fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """The source of one decollated batch item: its image file and id fields."""
    image = item.get("image")
    meta = getattr(image, "meta", None) or {}
    source = item.get("image_path") or meta.get("filename_or_obj")
    fields = {"image": "" if source is None else str(source)}
    for key in ID_FIELDS:
        value = _scalar(item.get(key))
        if value is not None:
            fields[key] = value
    return fields


class PredictionWriter:
    """Collect per-sample class probabilities during an evaluation and write a CSV.

    Columns: ``image`` (the image file: the ``image_path`` field the bundles' loading
    keeps, or the image's metadata), the id fields the data has (``id``, ``patient``,
    ``frame``, ``slice``), ``label`` (empty when unknown), ``pred`` (arg-max class) and one
    probability column per class. Written atomically at epoch completion; an existing file
    is refused at construction unless ``overwrite``.

    Args:
        path: the CSV file.
        class_names: names of the classes in index order (column headers).
        overwrite: replace an existing file.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        class_names: Sequence[str],
        overwrite: bool = False,
    ) -> None:
        self.path = check_writable(path, overwrite)
        self.class_names = list(class_names)
        self.overwrite = overwrite
        self.rows: list[dict[str, Any]] = []

    def attach(self, engine: Any) -> None:
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_STARTED, self._reset)
        engine.add_event_handler(Events.ITERATION_COMPLETED, self._collect)
        engine.add_event_handler(Events.EPOCH_COMPLETED, self._write)

    def _reset(self, engine: Any) -> None:
        self.rows = []

    def _collect(self, engine: Any) -> None:
        output, batch = engine.state.output, engine.state.batch
        if isinstance(output, Mapping) or isinstance(batch, Mapping):
            raise TypeError("PredictionWriter needs a decollated output (decollate=True)")
        for item, source in zip(output, batch, strict=True):
            probs = torch.as_tensor(item["pred"]).detach().cpu().double().ravel()
            label = item.get("label")
            row = _sample_fields(source)
            row["label"] = "" if label is None else int(torch.as_tensor(label).ravel()[0])
            row["pred"] = int(probs.argmax())
            for name, p in zip(self.class_names, probs.tolist(), strict=True):
                row[f"p_{name}"] = f"{p:.6g}"
            self.rows.append(row)

    def _write(self, engine: Any) -> None:
        present = [k for k in ID_FIELDS if any(k in row for row in self.rows)]
        columns = ["image", *present, "label", "pred", *[f"p_{c}" for c in self.class_names]]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(self.rows)
        with atomic_write(self.path, "w", overwrite=self.overwrite) as handle:
            handle.write(buffer.getvalue())
        self.overwrite = True

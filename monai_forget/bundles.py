"""Helpers that the MONAI bundles in ``bundles/`` call from their JSON configs.

A bundle config can only name importable callables, so the pieces a withdrawal audit
needs beyond MONAI live here:

- :func:`select`: the entries of a datalist section that belong to some providers
  (``site`` field), optionally a seeded, class-balanced subset of patients;
- :func:`labelled_images`: those entries through a bundle's deterministic
  preprocessing, as the :class:`~monai_forget.data.LabelledImages` the auditors take;
- :func:`load_weights` / :func:`save_weights`: safe (``weights_only``) and atomic,
  non-clobbering model files;
- :class:`WithdrawalAudit`: runs the auditors on one provider and writes one JSON per
  method, the HTML report and ``reference.json``, the shadow-model outputs that
  :func:`audit_metrics` turns into evaluation-time metrics;
- :class:`MetricsWriter` and :class:`PredictionWriter`: ignite handlers writing an
  evaluation's metrics (JSON) and per-sample predictions (CSV) atomically.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from monai_forget.audit.result import AuditResult, _plain
from monai_forget.data import LabelledImages
from monai_forget.fingerprint import data_fingerprint
from monai_forget.io import atomic_write, check_writable

__all__ = [
    "REFERENCE_VERSION",
    "MetricsWriter",
    "PredictionWriter",
    "WithdrawalAudit",
    "audit_metrics",
    "check_outputs",
    "labelled_images",
    "load_weights",
    "save_training_summary",
    "save_weights",
    "select",
    "without_overlap",
]

#: Format version of ``reference.json``.
REFERENCE_VERSION = 1


# --------------------------------------------------------------------------------------
# Datalist entries
# --------------------------------------------------------------------------------------


def _as_names(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def select(
    entries: Sequence[Mapping[str, Any]],
    sites: str | Sequence[str] | None = None,
    exclude_sites: str | Sequence[str] | None = None,
    max_per_class: int | None = None,
    seed: int = 0,
    name: str = "datalist section",
    check_files: bool = True,
) -> list[dict[str, Any]]:
    """Entries of one datalist section, filtered by provider and optionally subsampled.

    Args:
        entries: the section's entries (``load_decathlon_datalist`` output), each with
            ``label`` and, when filtering by provider, ``site``.
        sites: keep only these providers (``None``: every provider).
        exclude_sites: drop these providers (e.g. the withdrawn one, to retrain without it).
        max_per_class: keep at most this many patients per class (entries of a patient
            stay together; entries without ``patient`` count as their own patient),
            drawn with ``seed``. ``None`` keeps everything. For bounded runs.
        seed: seed of the subsample.
        name: how errors refer to the section.
        check_files: check that every selected entry's ``image`` file exists, so a
            stale datalist fails here, naming the file, not deep inside a data loader.

    Returns:
        New dicts (the inputs are not modified), in the original order.

    Raises:
        ValueError: unknown provider names, entries without ``site``/``label``, a bad
            ``max_per_class``, or nothing left to return.
        FileNotFoundError: a selected entry's image file does not exist.
    """
    keep_sites, drop_sites = _as_names(sites), _as_names(exclude_sites)
    entries = [dict(e) for e in entries]
    if keep_sites is not None or drop_sites is not None:
        missing = [i for i, e in enumerate(entries) if "site" not in e]
        if missing:
            raise ValueError(
                f"{name}: entries {missing[:5]} have no 'site' field, so providers cannot be "
                "selected; prepare the datalist with providers (monai-forget prepare ... "
                "--provider/--random-sites/--site-map)"
            )
        present = sorted({str(e["site"]) for e in entries})
        unknown = sorted(set(keep_sites or ()) - set(present))
        if unknown:
            raise ValueError(f"{name}: provider(s) {unknown} not found; providers: {present}")
        entries = [
            e
            for e in entries
            if (keep_sites is None or str(e["site"]) in keep_sites)
            and (drop_sites is None or str(e["site"]) not in drop_sites)
        ]
    if max_per_class is not None:
        if int(max_per_class) < 1:
            raise ValueError(f"max_per_class must be a positive integer, got {max_per_class}")
        entries = _subsample_patients(entries, int(max_per_class), seed, name)
    if not entries:
        raise ValueError(
            f"{name}: no entries left after selecting providers {keep_sites or 'all'} "
            f"and excluding {drop_sites or 'none'}"
        )
    if check_files:
        _check_files(entries, name)
    return entries


def _check_files(entries: Sequence[Mapping[str, Any]], name: str) -> None:
    paths = {str(e["image"]) for e in entries if isinstance(e.get("image"), (str, os.PathLike))}
    missing = sorted(path for path in paths if not Path(path).is_file())
    if missing:
        raise FileNotFoundError(
            f"{name}: {len(missing)} image file(s) named in the datalist do not exist, "
            f"e.g. {missing[0]}; re-run `monai-forget prepare` or fix the paths (relative "
            "paths are resolved against the datalist's folder)"
        )


def _subsample_patients(
    entries: list[dict[str, Any]], max_per_class: int, seed: int, name: str
) -> list[dict[str, Any]]:
    patients: dict[int, list[str]] = defaultdict(list)
    for i, e in enumerate(entries):
        if "label" not in e:
            raise ValueError(f"{name}: entry {i} has no 'label'")
        patient = str(e.get("patient", f"#entry{i}"))
        label = int(e["label"])
        if patient not in patients[label]:
            patients[label].append(patient)
    rng = np.random.default_rng(seed)
    chosen: set[str] = set()
    for label in sorted(patients):
        group = sorted(patients[label])
        picked = rng.permutation(len(group))[:max_per_class]
        chosen.update(group[j] for j in picked)
    return [e for i, e in enumerate(entries) if str(e.get("patient", f"#entry{i}")) in chosen]


def _entry_id(entry: Mapping[str, Any]) -> str:
    text = str(entry.get("image", "?"))
    for key in ("frame_index", "slice"):
        if entry.get(key) is not None:
            text += f"#{key}={entry[key]}"
    return text


def labelled_images(
    entries: Sequence[Mapping[str, Any]],
    transform: Callable[[dict[str, Any]], Mapping[Hashable, Any]],
    num_classes: int,
    image_key: str = "image",
    label_key: str = "label",
) -> LabelledImages:
    """Datalist entries through a deterministic preprocessing, as auditor input.

    The auditors run models on :class:`~monai_forget.data.LabelledImages` directly, so
    ``transform`` must be the bundle's evaluation preprocessing (no random transform):
    the images must be exactly what the evaluator feeds the network.

    Args:
        entries: datalist entries with image paths and integer labels.
        transform: the preprocessing (e.g. a ``monai.transforms.Compose``); it receives a
            copy of each entry.
        num_classes: number of classes of the task.
        image_key: key of the image after the transform (``(C, H, W)``).
        label_key: key of the integer class label in the entry.

    Raises:
        ValueError: no entries, a missing label, or images of different shapes.
    """
    if not entries:
        raise ValueError("no datalist entries to load")
    images: list[np.ndarray] = []
    labels: list[int] = []
    ids: list[str] = []
    for i, entry in enumerate(entries):
        if label_key not in entry:
            raise ValueError(f"entry {i} ({_entry_id(entry)}) has no {label_key!r}")
        out = transform(dict(entry))
        image = out[image_key]
        if isinstance(image, torch.Tensor):
            image = image.detach().cpu().numpy()
        image = np.asarray(image, dtype=np.float32)
        if image.ndim != 3:
            raise ValueError(
                f"{_entry_id(entry)}: the preprocessing gives shape {image.shape}; expected "
                "channel-first (C, H, W)"
            )
        if images and image.shape != images[0].shape:
            raise ValueError(
                f"{_entry_id(entry)}: shape {image.shape} differs from {images[0].shape} "
                f"({ids[0]}); the preprocessing must crop or resize to one size"
            )
        images.append(image)
        labels.append(int(np.asarray(entry[label_key]).ravel()[0]))
        ids.append(_entry_id(entry))
    return LabelledImages(np.stack(images), np.asarray(labels), tuple(ids), int(num_classes))


def without_overlap(
    data: LabelledImages, reference: LabelledImages, name: str = "calibration set"
) -> LabelledImages:
    """``data`` without the samples whose pixels equal those of a sample of ``reference``.

    Public data sets hold exact duplicates across splits (PneumoniaMNIST has images
    present in both its training and validation splits); a calibration set D_C must
    share no sample with D_Q, so such copies are dropped, by content hash, and counted
    in a message.

    Raises:
        ValueError: nothing is left.
    """
    from monai_forget.fingerprint import sample_hashes

    ref = set(sample_hashes(reference))
    keep = np.array([h not in ref for h in sample_hashes(data)], dtype=bool)
    if keep.all():
        return data
    if not keep.any():
        raise ValueError(f"every sample of the {name} also appears in the query set")
    dropped = np.flatnonzero(~keep)
    examples = [data.ids[i] for i in dropped[:3]] if data.ids else dropped[:3].tolist()
    print(
        f"{name}: dropped {len(dropped)} of {len(data)} samples identical to a query sample "
        f"(e.g. {examples})"
    )
    return data.subset(keep)


# --------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------


def check_outputs(*paths: str | os.PathLike | None, overwrite: bool = False) -> None:
    """Refuse, before any work starts, to replace existing outputs unless ``overwrite``.

    Raises:
        FileExistsError: one of ``paths`` exists and ``overwrite`` is false.
    """
    for path in paths:
        if path is not None:
            check_writable(path, overwrite)


def load_weights(
    model: nn.Module, path: str | os.PathLike, device: str | torch.device | None = None
) -> nn.Module:
    """Load a state dict saved by :func:`save_weights` (or MONAI's ``CheckpointSaver``).

    The file is read with ``torch.load(weights_only=True)``: nothing is unpickled. A
    dict holding the state dict under ``"model"`` or ``"state_dict"`` is accepted.

    Returns:
        ``model`` with the weights, on ``device`` (if given), in eval mode.

    Raises:
        FileNotFoundError: the file is missing (train the bundle first).
        ValueError: the file does not fit the network.
    """
    from monai_forget.networks import _load_state_dict

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"model file {path} not found; train it first (configs/train.json) or pass "
            "the checkpoint path"
        )
    state = _load_state_dict(path, "cpu")
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise ValueError(f"{path} does not fit the bundle's network: {err}") from err
    if device is not None:
        model = model.to(device)
    return model.eval()


def save_weights(model: nn.Module, path: str | os.PathLike, overwrite: bool = False) -> Path:
    """Save ``model.state_dict()`` (on CPU) atomically; refuse to replace a file unless asked."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    with atomic_write(path, "wb", overwrite=overwrite) as handle:
        torch.save(state, handle)
    return Path(path)


# --------------------------------------------------------------------------------------
# The audit of one provider
# --------------------------------------------------------------------------------------


class WithdrawalAudit:
    """Withdrawal audit of one provider, as a bundle component (``audit.json``).

    Runs every auditor (``KSAuditor``, ``EMAAuditor``; each trains the shadow models it
    needs with its recipe) on the target, the provider's data D_Q and the calibration
    set D_C, then writes into ``output_dir``:

    - ``<method>.json`` per auditor (:meth:`AuditResult.save`);
    - ``report.html`` (:func:`monai_forget.audit.write_report`);
    - ``reference.json``: the shadow models' confidences on D_Q and the EMA thresholds,
      which :func:`audit_metrics` hands to the evaluation-time handlers.

    Every output is written atomically; existing ones are refused unless ``overwrite``.

    Args:
        target: the trained model under audit.
        query: D_Q, the withdrawn provider's data (evaluation preprocessing).
        calibration: D_C, data from the same domain sharing no sample with D_Q.
        auditors: the auditors to run.
        output_dir: where the results go.
        provider: the provider's name (labels and reference).
        scenario: a free-text name of the audited model (e.g. "trained with provider").
        overwrite: replace existing outputs.
        title: the report title.
    """

    def __init__(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: LabelledImages,
        auditors: Sequence[Any],
        output_dir: str | os.PathLike,
        provider: str,
        scenario: str = "",
        overwrite: bool = False,
        title: str = "Withdrawal audit",
    ) -> None:
        if not auditors:
            raise ValueError("WithdrawalAudit needs at least one auditor")
        self.target = target
        self.query = query
        self.calibration = calibration
        self.auditors = list(auditors)
        self.output_dir = Path(output_dir)
        self.provider = str(provider)
        self.scenario = scenario
        self.overwrite = bool(overwrite)
        self.title = title
        self.results: list[AuditResult] = []

    def _methods(self) -> list[str]:
        from monai_forget.audit import EMAAuditor, KSAuditor

        methods = []
        for auditor in self.auditors:
            if isinstance(auditor, KSAuditor):
                methods.append("ks")
            elif isinstance(auditor, EMAAuditor):
                methods.append("ema")
            else:
                raise TypeError(f"unsupported auditor {type(auditor).__name__}")
        if len(set(methods)) != len(methods):
            raise ValueError(f"one auditor per method, got {methods}")
        return methods

    def outputs(self) -> list[Path]:
        """The files :meth:`run` writes."""
        names = [f"{m}.json" for m in self._methods()] + ["report.html", "reference.json"]
        return [self.output_dir / n for n in names]

    def run(self) -> list[AuditResult]:
        """Run the auditors and write the results; returns them in auditor order."""
        check_outputs(*self.outputs(), overwrite=self.overwrite)
        label = f"provider {self.provider}" + (f", {self.scenario}" if self.scenario else "")
        self.results = [
            auditor.audit(self.target, self.query, self.calibration, label=label)
            for auditor in self.auditors
        ]
        for method, result in zip(self._methods(), self.results, strict=True):
            result.save(self.output_dir / f"{method}.json", overwrite=self.overwrite)
            print(result.summary())
        from monai_forget.audit import write_report

        write_report(
            self.results,
            self.output_dir / "report.html",
            title=f"{self.title}: provider {self.provider}",
            overwrite=self.overwrite,
        )
        reference = self.reference()
        with atomic_write(self.output_dir / "reference.json", "w", overwrite=self.overwrite) as f:
            f.write(json.dumps(_plain(reference), indent=1))
        print(f"audit of provider {self.provider!r} written to {self.output_dir}")
        return self.results

    def reference(self) -> dict[str, Any]:
        """What the evaluation-time handlers need, from the results of :meth:`run`."""
        if not self.results:
            raise RuntimeError("run the audit first")
        ref: dict[str, Any] = {
            "version": REFERENCE_VERSION,
            "provider": self.provider,
            "query_size": len(self.query),
            "query_fingerprint": data_fingerprint(self.query),
            "num_classes": self.query.num_classes,
        }
        for method, result in zip(self._methods(), self.results, strict=True):
            if method == "ks":
                ref["ks"] = {
                    "query_confidence": result.arrays["query_shadow_confidence"],
                    "calibration_confidence": result.arrays["calibration_shadow_confidence"],
                    "audit_rho": result.statistic,
                }
            else:
                ref["ema"] = {
                    "thresholds": result.details["thresholds"],
                    "alpha": result.details["alpha"],
                    "test": result.details["test"],
                    "audit_rho": result.statistic,
                }
        return ref


def audit_metrics(
    reference_file: str | os.PathLike,
    provider: str | None = None,
    query_size: int | None = None,
    from_logits: bool = False,
    pred_key: str = "pred",
) -> dict[str, Any]:
    """Evaluation-time audit metrics from the ``reference.json`` of :class:`WithdrawalAudit`.

    Returns ``{"rho_KS": KSCalibratedRatio, "rho_EMA": EMAAudit}`` (those present in the
    file) for a ``SupervisedEvaluator``'s ``additional_metrics``; the evaluation must run
    over the same D_Q the reference was computed on.

    Args:
        reference_file: the file written by ``audit.json``.
        provider: the provider being evaluated; must match the file's.
        query_size: the number of samples the evaluation covers; must match the file's.
        from_logits: the evaluator's ``pred_key`` item holds logits.
        pred_key: the item of the evaluator's output the metrics read. The bundles keep a
            copy of the logits as ``logits`` and pass ``from_logits=True``: a float32
            softmax rounds confidences near 1 (ties the auditors, which take the softmax
            in float64, do not have), which can move rho_KS by a sample's share.

    Raises:
        FileNotFoundError: no reference file (run ``audit.json`` first).
        ValueError: the file was made for another provider or another D_Q size.
    """
    from monai_forget.handlers import EMAAudit, KSCalibratedRatio, batch_output

    path = Path(reference_file)
    if not path.is_file():
        raise FileNotFoundError(
            f"audit reference {path} not found; run the bundle's audit.json for this provider "
            "first (it writes reference.json), or evaluate without the audit handlers"
        )
    ref = json.loads(path.read_text())
    if ref.get("version") != REFERENCE_VERSION:
        raise ValueError(f"{path}: unsupported reference version {ref.get('version')!r}")
    if provider is not None and str(provider) != ref["provider"]:
        raise ValueError(
            f"{path} was computed for provider {ref['provider']!r}, but this evaluation is "
            f"over provider {provider!r}; run audit.json for {provider!r}"
        )
    if query_size is not None and int(query_size) != int(ref["query_size"]):
        raise ValueError(
            f"{path} was computed on {ref['query_size']} query samples, but this evaluation "
            f"covers {query_size}; evaluate the same selection of provider "
            f"{ref['provider']!r} that audit.json audited"
        )
    metrics: dict[str, Any] = {}
    if "ks" in ref:
        metrics["rho_KS"] = KSCalibratedRatio(
            ref["ks"]["query_confidence"],
            ref["ks"]["calibration_confidence"],
            from_logits=from_logits,
            output_transform=batch_output(pred_key),
        )
    if "ema" in ref:
        metrics["rho_EMA"] = EMAAudit(
            ref["ema"]["thresholds"],
            test=ref["ema"]["test"],
            from_logits=from_logits,
            output_transform=batch_output(pred_key),
        )
    if not metrics:
        raise ValueError(f"{path} holds neither K-S nor EMA references")
    return metrics


# --------------------------------------------------------------------------------------
# Evaluation outputs
# --------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    value = _plain(value)
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


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
        metrics = {str(k): _json_value(v) for k, v in engine.state.metrics.items()}
        if self.class_names:
            for name, value in list(metrics.items()):
                if isinstance(value, list) and len(value) == len(self.class_names):
                    metrics[f"{name}_by_class"] = dict(zip(self.class_names, value, strict=True))
        record = {"metrics": metrics, **{k: _json_value(v) for k, v in self.extra.items()}}
        with atomic_write(self.path, "w", overwrite=self.overwrite) as handle:
            handle.write(json.dumps(record, indent=1))
        # A second epoch of the same engine rewrites its own file.
        self.overwrite = True
        self.written = record


def _sample_id(item: Mapping[str, Any], index: int) -> str:
    """A readable id of one decollated batch item: its file, patient, frame and slice."""
    image = item.get("image")
    meta = getattr(image, "meta", None) or {}
    name = meta.get("filename_or_obj")
    parts = [os.path.basename(str(name))] if name else []
    for key in ("id", "patient", "frame", "slice"):
        value = item.get(key)
        if value is not None and not isinstance(value, torch.Tensor | np.ndarray):
            parts.append(f"{key}={value}")
        elif isinstance(value, torch.Tensor | np.ndarray) and np.asarray(value).size == 1:
            parts.append(f"{key}={np.asarray(value).ravel()[0]}")
    return " ".join(parts) if parts else str(index)


class PredictionWriter:
    """Collect per-sample class probabilities during an evaluation and write a CSV.

    Columns: ``image`` (the entry id, with slice/frame when the image is a slice of a
    volume), ``label`` (when present), ``pred`` (arg-max class) and one probability column
    per class. Written atomically at epoch completion; an existing file is refused at
    construction unless ``overwrite``.

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
        self.rows: list[list[Any]] = []

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
            name = _sample_id(source, len(self.rows))
            label = item.get("label")
            label = "" if label is None else int(torch.as_tensor(label).ravel()[0])
            self.rows.append(
                [name, label, int(probs.argmax())] + [f"{p:.6g}" for p in probs.tolist()]
            )

    def _write(self, engine: Any) -> None:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["image", "label", "pred", *[f"p_{c}" for c in self.class_names]])
        writer.writerows(self.rows)
        with atomic_write(self.path, "w", overwrite=self.overwrite) as handle:
            handle.write(buffer.getvalue())
        self.overwrite = True


def save_training_summary(
    path: str | os.PathLike,
    trainer: Any,
    evaluator: Any | None = None,
    datalist: Sequence[Mapping[str, Any]] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write what a bundle training run did to JSON: data, budget, times, last metrics.

    Args:
        path: the JSON file (written atomically).
        trainer: the finished ``SupervisedTrainer``.
        evaluator: its validation evaluator, if any (last validation metrics).
        datalist: the training entries (counts per provider and class are recorded).
        overwrite: replace an existing file.
    """
    state = trainer.state
    total = float(state.times.get("COMPLETED") or 0.0)
    record: dict[str, Any] = {
        "epochs": int(state.epoch),
        "iterations": int(state.iteration),
        "iterations_per_epoch": int(state.epoch_length or 0),
        "seconds_total": round(total, 2),
        "seconds_per_epoch": round(total / max(int(state.epoch), 1), 2),
        "train_metrics": {k: _json_value(v) for k, v in state.metrics.items()},
    }
    if evaluator is not None and evaluator.state is not None:
        record["validation_metrics"] = {
            k: _json_value(v) for k, v in evaluator.state.metrics.items()
        }
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
    with atomic_write(path, "w", overwrite=overwrite) as handle:
        handle.write(json.dumps(_plain(record), indent=1))
    print(json.dumps(_plain({k: v for k, v in record.items() if k != "training_data"})))
    return record

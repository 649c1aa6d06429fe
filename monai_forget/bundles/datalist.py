"""Datalist entries for the bundles: provider selection and deterministic preprocessing.

- :func:`select`: the entries of a datalist section that belong to some providers
  (``site`` field), optionally a seeded, class-balanced subset of patients;
- :func:`labelled_images`: those entries through a bundle's deterministic
  preprocessing, as the :class:`~monai_forget.data.LabelledImages` the auditors take.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget.checks import COUNT, check_in
from monai_forget.data import LabelledImages

__all__ = ["labelled_images", "select"]

logger = logging.getLogger(__name__)


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
            drawn with ``seed``. ``None`` keeps everything. For bounded runs; a cut is
            logged (``name``: kept N of M entries).
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
                "`providers`/`random_sites`/`site_map`)"
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
        check_in("max_per_class", int(max_per_class), COUNT)
        before = len(entries)
        entries = _subsample_patients(entries, int(max_per_class), seed, name)
        if len(entries) < before:  # a bounded run says what it left out
            logger.info(
                "%s: max_per_class=%d keeps %d of %d entries (seed %d)",
                name, int(max_per_class), len(entries), before, seed,
            )  # fmt: skip
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


def entry_id(entry: Mapping[str, Any]) -> str:
    """An entry's name: its image path, with the frame or slice it takes when it has one."""
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
            raise ValueError(f"entry {i} ({entry_id(entry)}) has no {label_key!r}")
        out = transform(dict(entry))
        image = out[image_key]
        if isinstance(image, torch.Tensor):
            image = image.detach().cpu().numpy()
        image = np.asarray(image, dtype=np.float32)
        if image.ndim != 3:
            raise ValueError(
                f"{entry_id(entry)}: the preprocessing gives shape {image.shape}; expected "
                "channel-first (C, H, W)"
            )
        if images and image.shape != images[0].shape:
            raise ValueError(
                f"{entry_id(entry)}: shape {image.shape} differs from {images[0].shape} "
                f"({ids[0]}); the preprocessing must crop or resize to one size"
            )
        images.append(image)
        labels.append(int(np.asarray(entry[label_key]).ravel()[0]))
        ids.append(entry_id(entry))
    return LabelledImages(np.stack(images), np.asarray(labels), tuple(ids), int(num_classes))

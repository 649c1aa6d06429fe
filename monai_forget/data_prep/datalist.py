"""Assemble and write MONAI datalist JSON with per-sample provenance.

The output is the format ``monai.data.load_decathlon_datalist`` reads::

    {"description": ..., "labels": {"0": "NOR", ...}, "provenance": {...},
     "training": [{"image": ..., "label": 0, "patient": ..., "site": ..., ...}],
     "validation": [...], "test": [...]}

Paths (``image``, ``seg``) are relative to a base directory, by default the folder of
the datalist file, which is also ``load_decathlon_datalist``'s default ``base_dir``;
or absolute.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monai_forget import __version__
from monai_forget.data_prep.sites import SiteSpec
from monai_forget.data_prep.splits import SPLITS, patients_in_several_splits, split_patients
from monai_forget.io import atomic_write

#: entry fields holding file paths (rendered relative to the base directory)
PATH_KEYS = ("image", "seg")

# Bookkeeping keys a layout may set on a sample; not copied into entries as-is.
_INTERNAL_KEYS = ("split",)


@dataclass(frozen=True)
class PathStyle:
    """How file paths are written: relative to ``base_dir``, or absolute when it is None."""

    base_dir: Path | None

    @classmethod
    def for_output(
        cls, output: str | Path, base_dir: str | Path | None = None, absolute: bool = False
    ) -> PathStyle:
        """Relative to ``base_dir`` (default: the datalist's folder), or absolute."""
        if absolute:
            if base_dir is not None:
                raise ValueError("`absolute` and `base_dir` exclude each other; choose one")
            return cls(None)
        return cls(Path(base_dir if base_dir is not None else Path(output).parent).resolve())

    def render(self, path: str | Path) -> str:
        """``path`` as written into the datalist (POSIX separators for portability)."""
        path = Path(path).resolve()
        if self.base_dir is None:
            return path.as_posix()
        return Path(os.path.relpath(path, self.base_dir)).as_posix()

    def describe(self) -> str:
        if self.base_dir is None:
            return "absolute"
        return "relative to base_dir"


def patient_strata(samples: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """``{patient: group}``; a patient with samples in several groups gets ``a+b``."""
    groups: dict[str, set[str]] = defaultdict(set)
    for sample in samples:
        groups[sample["patient"]].add(str(sample["group"]))
    return {p: "+".join(sorted(g)) for p, g in sorted(groups.items())}


def build_datalist(
    samples: Sequence[Mapping[str, Any]],
    *,
    sites: SiteSpec,
    fractions: tuple[float, float, float] | None,
    seed: int,
    labels: Sequence[str],
    paths: PathStyle,
    description: str,
    provenance: Mapping[str, Any],
    sources: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Assign providers and splits, then lay the samples out as a datalist.

    Args:
        samples: one dict per datalist entry with at least ``image`` (a path),
            ``label`` (class index), ``patient`` and ``group`` (class name); a ``split``
            key ("training"/"validation"/"test") when the source layout fixes the split.
        sites: provider assignment.
        fractions: patient-level (training, validation, test) fractions; ``None`` keeps
            each sample's ``split``.
        seed: seed of the random site and split assignments.
        labels: class names by index.
        paths: how file paths are written.
        description: human-readable description.
        provenance: layout-specific provenance (tool, source, options).
        sources: ``{patient: source}`` for ``--site-from-source``.

    Returns:
        The datalist dict (see the module docstring).

    Raises:
        ValueError: empty data, bad provider options, or fields that MONAI would
            misread as paths.
    """
    if not samples:
        raise ValueError("no samples found; check the dataset folder and options")
    strata = patient_strata(samples)
    site_of = sites.assign(strata, seed=seed, sources=sources)
    if fractions is not None:
        split_of = split_patients(
            {p: f"{site_of[p]}|{g}" for p, g in strata.items()}, fractions, seed
        )
        assigned = [dict(s, split=split_of[s["patient"]]) for s in samples]
    else:
        assigned = [dict(s) for s in samples]
    datalist: dict[str, Any] = {
        "description": description,
        "labels": {str(i): name for i, name in enumerate(labels)},
        "provenance": {},
        **{name: [] for name in SPLITS},
    }
    for sample in assigned:
        datalist[sample["split"]].append(_entry(sample, site_of[sample["patient"]], paths))
    overlap = patients_in_several_splits(assigned)
    datalist["provenance"] = {
        "tool": f"monai-forget {__version__}",
        **provenance,
        "site_assignment": sites.method,
        "site_map": None if sites.site_map is None else str(Path(sites.site_map).resolve()),
        "seed": seed,
        "split": "patient-level, seeded, stratified by site and group"
        if fractions is not None
        else "as given by the source layout",
        "split_fractions": None if fractions is None else list(fractions),
        "paths": paths.describe(),
        "base_dir": None if paths.base_dir is None else str(paths.base_dir),
        "patients_in_several_splits": overlap,
        "counts": _counts(datalist),
    }
    return datalist


def _entry(sample: Mapping[str, Any], site: str, paths: PathStyle) -> dict[str, Any]:
    """One datalist entry: image, label, seg first, then the provenance fields."""
    entry: dict[str, Any] = {"image": paths.render(sample["image"]), "label": sample["label"]}
    if sample.get("seg") is not None:
        entry["seg"] = paths.render(sample["seg"])
    entry["patient"] = sample["patient"]
    entry["site"] = site
    for key, value in sample.items():
        if key not in entry and key not in _INTERNAL_KEYS and key not in PATH_KEYS:
            entry[key] = value
    return entry


def _counts(datalist: Mapping[str, Any]) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for name in SPLITS:
        entries = datalist[name]
        counts[name] = {
            "entries": len(entries),
            "patients": len({e["patient"] for e in entries}),
            "sites": dict(sorted(Counter(e["site"] for e in entries).items())),
            "groups": dict(sorted(Counter(e["group"] for e in entries).items())),
        }
    return counts


def check_monai_paths(datalist: Mapping[str, Any], base_dir: Path) -> None:
    """Refuse fields that ``load_decathlon_datalist`` would rewrite into paths.

    MONAI joins every string field with ``base_dir`` when the result exists on disk, so
    a datalist written into, say, the ACDC ``training`` folder would turn
    ``"patient": "patient001"`` into a path.

    Raises:
        ValueError: names the entry field and the colliding path.
    """
    for name in SPLITS:
        for entry in datalist.get(name, []):
            for key, value in entry.items():
                if key in PATH_KEYS or not isinstance(value, str):
                    continue
                if os.path.exists(os.path.join(base_dir, value)):
                    raise ValueError(
                        f"field {key}={value!r} names an existing path under {base_dir}; "
                        "monai.data.load_decathlon_datalist would rewrite it into a path. "
                        "Write the datalist (or set `base_dir`) outside the dataset folder"
                    )


def write_datalist(datalist: Mapping[str, Any], output: str | Path, overwrite: bool) -> Path:
    """Check the datalist against MONAI's path rule and write it atomically.

    Raises:
        FileExistsError: ``output`` exists and ``overwrite`` is false.
        ValueError: see :func:`check_monai_paths`.
    """
    output = Path(output)
    base = datalist["provenance"].get("base_dir") or output.resolve().parent
    check_monai_paths(datalist, Path(base))
    with atomic_write(output, "w", overwrite=overwrite) as handle:
        json.dump(datalist, handle, indent=1)
        handle.write("\n")
    return output

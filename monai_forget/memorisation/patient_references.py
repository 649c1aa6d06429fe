"""Reference models a hospital can build for a leak scan: trained on halves of its own
patients, each roster name judged against the references that never saw its patient.

Why (measured, benchmarks/results/leak_scan_patient_references.md): reference models
trained without any roster name remove what a name does to every model of the design,
but a hospital cannot build them: it does not know which images carry a name. It does
know each image's patient and each roster name's patient. So (ours; LiRA's offline
design, Carlini et al. 2022, with the patient as the unit) the references are trained
in pairs on the two halves of the patients, a new split per pair
(:func:`split_patients`); every patient is left out of one model of each pair. Each
name's statistic, and its decoys', is taken against the references that never saw its
patient (:func:`unseen_references`): if the name was burned into that patient's
series, those models never saw it. Taking every reference for every name instead
lets the half that saw the series absorb the leak (MLP-1 on MNIST, a 10-image series:
found in 0 of 10 runs against every reference).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from monai_forget.memorisation.reference_scan import MIN_REFERENCES
from monai_forget.memorisation.roster import entry_places

__all__ = ["read_patient_ids", "split_patients", "unseen_references", "write_patient_ids"]


def split_patients(patients: Sequence[str], pairs: int, seed: int = 0) -> list[frozenset[str]]:
    """The patients each reference model trains on: ``pairs`` random splits in halves.

    Reference ``2j`` and ``2j + 1`` take the two halves of split ``j``, so every patient
    is unseen by exactly one model of each pair, and each name is judged against
    ``pairs`` references.

    Args:
        patients: the patient IDs of the audited model's training data (repeats are
            fine: one per image).
        pairs: number of splits; at least :data:`MIN_REFERENCES`.
        seed: seed of the splits.

    Raises:
        ValueError: fewer than 2 distinct patients or too few pairs.
    """
    unique = sorted({str(p) for p in patients})
    if len(unique) < 2:
        raise ValueError(f"{len(unique)} distinct patient(s): splitting needs at least 2")
    if pairs < MIN_REFERENCES:
        raise ValueError(
            f"pairs={pairs}: each name needs at least {MIN_REFERENCES} references that never "
            f"saw its patient, one per pair; pass pairs >= {MIN_REFERENCES}"
        )
    rng = np.random.default_rng(seed)
    out: list[frozenset[str]] = []
    for _ in range(pairs):
        order = rng.permutation(len(unique))
        first = frozenset(unique[i] for i in order[: len(unique) // 2])
        out += [first, frozenset(unique) - first]
    return out


def unseen_references(
    names: Sequence[str],
    name_patients: Sequence[str],
    reference_patients: Sequence[Collection[str]],
) -> list[tuple[int, ...]]:
    """For each name, the indices of the reference models whose training patients do
    not include the name's patient.

    Args:
        names: the roster (used only to say which entries are at fault).
        name_patients: each name's patient ID, in roster order.
        reference_patients: for each reference model, the patient IDs of its training
            images.

    Warns about names whose patient is in no reference's list (see
    :func:`_check_ids_match`).

    Raises:
        ValueError: the lists do not match the roster, no roster patient is in any list
            (different ID formats), or a name has fewer than
            :data:`MIN_REFERENCES` references that never saw its patient (named by its
            roster entry, never by the name).
    """
    if len(name_patients) != len(names):
        raise ValueError(
            f"{len(name_patients)} patient IDs for {len(names)} roster names: give one "
            "patient ID per name (`patient_column`)"
        )
    seen = [frozenset(str(p) for p in ps) for ps in reference_patients]
    _check_ids_match(names, name_patients, seen)
    out = [
        tuple(k for k, patients in enumerate(seen) if str(patient) not in patients)
        for patient in name_patients
    ]
    short = [i for i, unseen in enumerate(out) if len(unseen) < MIN_REFERENCES]
    if short:
        raise ValueError(
            f"{entry_places(names, short)} of the roster: as few as "
            f"{min(len(out[i]) for i in short)} of the {len(seen)} reference models never saw "
            f"the patient, and each name needs at least {MIN_REFERENCES}: train the references "
            "on halves of the patients (split_patients; CLI: memorisation split-patients)"
        )
    return out


def _check_ids_match(
    names: Sequence[str], name_patients: Sequence[str], seen: Sequence[frozenset[str]]
) -> None:
    """Refuse patient IDs that match no reference's list at all, and warn about names
    whose patient is in none: judged against every reference, which is right only for a
    patient outside the audited training data (a mistyped ID would hide a leak)."""
    known = frozenset().union(*seen)
    absent = [i for i, patient in enumerate(name_patients) if str(patient) not in known]
    if absent and len(absent) == len(name_patients):
        raise ValueError(
            "no roster patient ID is in any reference model's patient list: the two use "
            "different IDs (check the roster's patient column and the lists' format)"
        )
    if absent:
        warnings.warn(
            f"{entry_places(names, absent)} of the roster: the patient is in no reference "
            "model's training data, so the name is judged against every reference; right "
            "for a patient outside the audited training data, wrong for a mistyped ID",
            UserWarning,
            stacklevel=3,
        )


def read_patient_ids(path: str | os.PathLike) -> list[str]:
    """Patient IDs from a text file, one per line (blank lines skipped).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file holds no ID.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"patient list {path} does not exist")
    ids = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]
    ids = [i for i in ids if i]
    if not ids:
        raise ValueError(f"patient list {path} holds no patient ID; write one per line")
    return ids


def write_patient_ids(
    splits: Sequence[Collection[str]], out_dir: str | os.PathLike, *, overwrite: bool = False
) -> list[Path]:
    """Write each reference's patients to ``reference_<k>_patients.txt`` (k from 1),
    atomically; every path is checked before anything is written.

    Raises:
        FileExistsError: a file exists and ``overwrite`` is false.
    """
    from monai_forget.io import atomic_write, check_writable

    out = Path(out_dir)
    paths = [
        check_writable(out / f"reference_{k}_patients.txt", overwrite)
        for k in range(1, len(splits) + 1)
    ]
    out.mkdir(parents=True, exist_ok=True)
    for path, patients in zip(paths, splits, strict=True):
        with atomic_write(path, "w", overwrite=overwrite) as handle:
            handle.write("".join(f"{p}\n" for p in sorted(patients)))
    return paths

"""Kermany pediatric chest X-ray folders to datalist samples.

Layout: ``<root>/{train,val,test}/{NORMAL,PNEUMONIA}/*.jpeg`` (the Kaggle
"chest_xray" release; point ``root`` at the folder holding ``train/``). The patient id
comes from the file name: ``person1_bacteria_1.jpeg`` -> ``person1`` (subtype
bacteria), ``IM-0115-0001.jpeg`` -> ``IM-0115``, ``NORMAL2-IM-1427-0001.jpeg`` ->
``NORMAL2-IM-1427``. Ids are taken as unique across the release.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from monai_forget.data_prep.splits import SOURCE_SPLIT_KEYS

CLASSES = ("NORMAL", "PNEUMONIA")
LABEL_NAMES = ("normal", "pneumonia")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")

#: default patient patterns; each has a ``patient`` group, optionally a ``subtype``
PATTERNS = (
    re.compile(r"^(?P<patient>person\d+)_(?P<subtype>bacteria|virus)_\d+$", re.IGNORECASE),
    # a numbered image of a patient, sometimes with a second counter: IM-0115-0001-0002
    re.compile(r"^(?P<patient>(?:NORMAL2-)?IM-\d+)(?:-\d+)+$", re.IGNORECASE),
)


def parse_patient(path: Path, patterns: tuple[re.Pattern, ...] = PATTERNS) -> dict[str, str]:
    """``{"patient": ..., ["subtype": ...]}`` from an image file name.

    Raises:
        ValueError: the name matches no pattern (names the file and the fix).
    """
    for pattern in patterns:
        match = pattern.match(path.stem)
        if match:
            found = {k: v for k, v in match.groupdict().items() if v is not None}
            if "subtype" in found:
                found["subtype"] = found["subtype"].lower()
            return found
    raise ValueError(
        f"{path}: cannot read a patient id from the file name; expected names like "
        "person1_bacteria_1.jpeg, IM-0115-0001.jpeg or NORMAL2-IM-1427-0001.jpeg "
        "(or pass `patient_regex` with a (?P<patient>...) group)"
    )


def collect(root: str | Path, patient_regex: str | None = None) -> list[dict[str, Any]]:
    """One sample per image, in the release's own split.

    Args:
        root: the folder holding ``train/``, ``val/``, ``test/``.
        patient_regex: replaces the default patterns; must define a ``patient`` group and
            match the file name without its suffix.

    Returns:
        Samples with ``image``, ``label`` (0 normal, 1 pneumonia), ``patient``, ``group``,
        ``source_split``, ``subtype`` (bacteria/virus when the name says) and ``split``.

    Raises:
        FileNotFoundError: no split folder, or a split folder without a class folder.
        ValueError: an unparseable file name.
    """
    root = Path(root)
    patterns = PATTERNS
    if patient_regex is not None:
        pattern = re.compile(patient_regex)
        if "patient" not in pattern.groupindex:
            raise ValueError(f"`patient_regex` {patient_regex!r} needs a (?P<patient>...) group")
        patterns = (pattern,)
    splits = [s for s in SOURCE_SPLIT_KEYS if (root / s).is_dir()]
    if not splits:
        raise FileNotFoundError(
            f"no train/, val/ or test/ folder in {root}; point to the chest_xray folder"
        )
    samples = []
    for split in splits:
        for label, cls in enumerate(CLASSES):
            folder = root / split / cls
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"{folder} not found; expected {split}/{{NORMAL,PNEUMONIA}}"
                )
            for path in sorted(folder.iterdir()):
                if path.suffix.lower() not in IMAGE_SUFFIXES or path.name.startswith("."):
                    continue  # .DS_Store and friends
                ids = parse_patient(path, patterns)
                sample = {
                    "image": path,
                    "label": label,
                    "patient": ids["patient"],
                    "group": LABEL_NAMES[label],
                    "source_split": split,
                    "split": SOURCE_SPLIT_KEYS[split],
                }
                if "subtype" in ids:
                    sample["subtype"] = ids["subtype"]
                samples.append(sample)
    return samples

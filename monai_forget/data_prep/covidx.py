"""COVIDx CXR label files to datalist samples.

Layout: ``<root>/{train,val,test}.txt`` with one image per line,
``patient_id filename label source`` separated by whitespace, and the images in
``<root>/{train,val,test}/`` (the COVIDx CXR-2/3/4 release). The ``source`` column (the
contributing dataset, e.g. ``rsna``, ``cohen``) can serve as the provider
(``--site-from-source``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from monai_forget.data_prep.splits import SOURCE_SPLIT_KEYS
from monai_forget.data_prep.tables import read_text_lines

#: class orders of the COVIDx releases: CXR-2 onwards, and the older three-class files
KNOWN_LABELS = (("negative", "positive"), ("normal", "pneumonia", "COVID-19"))

# The file name is everything between the first field and the last two, so names with
# spaces still parse.
_LINE_RE = re.compile(r"^(?P<patient>\S+)\s+(?P<filename>.+?)\s+(?P<label>\S+)\s+(?P<source>\S+)$")


def read_label_file(path: Path) -> list[tuple[int, dict[str, str]]]:
    """``(line_number, fields)`` for every non-blank line of a COVIDx label file.

    Raises:
        ValueError: a line without the four fields (names the line).
    """
    rows = []
    for number, raw in enumerate(read_text_lines(path, "COVIDx label file"), start=1):
        if not raw.strip():
            continue
        match = _LINE_RE.match(raw.strip())
        if match is None:
            raise ValueError(
                f"{path}, line {number}: expected the four fields 'patient_id filename label "
                f"source', got {len(raw.split())}"
            )
        rows.append((number, match.groupdict()))
    return rows


def label_order(found: set[str], label_names: Sequence[str] | None) -> tuple[str, ...]:
    """Class names by index: ``label_names`` if given, else a known COVIDx order.

    Raises:
        ValueError: labels outside the given or known orders.
    """
    if label_names is not None:
        unknown = found - set(label_names)
        if unknown:
            raise ValueError(
                f"labels {sorted(unknown)} are not in `label_names` {list(label_names)}"
            )
        return tuple(label_names)
    for known in KNOWN_LABELS:
        if found <= set(known):
            return known
    raise ValueError(
        f"labels {sorted(found)} match no known COVIDx class order {KNOWN_LABELS}; "
        "pass `label_names` NAME0,NAME1,... to fix the order"
    )


def collect(
    root: str | Path, label_names: Sequence[str] | None = None
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """One sample per label-file line, in the release's own split.

    Returns:
        ``(samples, label_names)``; samples carry ``image``, ``label``, ``patient``,
        ``group`` (label text), ``source``, ``source_split`` and ``split``.

    Raises:
        FileNotFoundError: no label file, or an image a label file names is missing.
        ValueError: a malformed line, or a patient listed under two sources.
    """
    root = Path(root)
    rows = []
    for split in SOURCE_SPLIT_KEYS:
        label_file = root / f"{split}.txt"
        if label_file.is_file():
            rows.extend((split, label_file, n, f) for n, f in read_label_file(label_file))
    if not rows:
        raise FileNotFoundError(f"no train.txt, val.txt or test.txt label file in {root}")
    names = label_order({fields["label"] for *_, fields in rows}, label_names)
    samples = []
    source_of: dict[str, tuple[str, str]] = {}
    for split, label_file, number, fields in rows:
        where = f"{label_file}, line {number}"
        image = root / split / fields["filename"]
        if not image.is_file():
            raise FileNotFoundError(f"{where}: image {image} not found")
        patient, source = fields["patient"], fields["source"]
        first = source_of.setdefault(patient, (source, where))
        if first[0] != source:
            raise ValueError(
                f"{where}: its patient has source {source!r} but {first[1]} gave "
                f"{first[0]!r}; one patient cannot come from two sources"
            )
        samples.append(
            {
                "image": image,
                "label": names.index(fields["label"]),
                "patient": patient,
                "group": fields["label"],
                "source": source,
                "source_split": split,
                "split": SOURCE_SPLIT_KEYS[split],
            }
        )
    return samples, names


def patient_sources(samples: list[dict[str, Any]]) -> dict[str, str]:
    """``{patient: source}`` for ``--site-from-source``."""
    return {s["patient"]: s["source"] for s in samples}

"""The manifest of every file the injector wrote: JSON and CSV twins."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from monai_forget import __version__
from monai_forget.canary import TYPEFACE
from monai_forget.dicom.hashing import TextHasher
from monai_forget.io import atomic_write, check_writable


def manifest_paths(prefix: str | os.PathLike) -> tuple[Path, Path]:
    """The JSON and CSV paths for a manifest prefix (``out`` -> ``out.manifest.json``)."""
    prefix = Path(prefix)
    return (
        prefix.with_name(prefix.name + ".manifest.json"),
        prefix.with_name(prefix.name + ".manifest.csv"),
    )


def _csv_cell(value: object) -> object:
    # Lists (frames, per-frame values) go into one cell as JSON so the CSV stays flat.
    return json.dumps(value) if isinstance(value, (list, tuple, dict)) else value


def write_manifest(
    records: list[dict],
    prefix: str | os.PathLike,
    hasher: TextHasher,
    overwrite: bool = False,
) -> tuple[Path, Path]:
    """Write ``records`` to ``<prefix>.manifest.json`` and ``<prefix>.manifest.csv``.

    The JSON holds a header (tool version, time, typeface, how the text is recorded)
    and the records; the CSV holds one row per record. Both are written atomically and
    both are checked for existence before either is written.

    Returns:
        The JSON and CSV paths.
    """
    json_path, csv_path = manifest_paths(prefix)
    check_writable(json_path, overwrite)
    check_writable(csv_path, overwrite)
    document = {
        "tool": "monai-forget canary inject",
        "version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "typeface": TYPEFACE,
        "text_field": hasher.field,
        "text_recording": "plain text"
        if hasher.plain_text
        else (f"HMAC-SHA256 with a salt that is {hasher.salt_source}"),
        "records": records,
    }
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for record in records:
        writer.writerow({k: _csv_cell(v) for k, v in record.items()})
    with atomic_write(json_path, "w", overwrite=overwrite) as handle:
        json.dump(document, handle, indent=2)
        handle.write("\n")
    with atomic_write(csv_path, "w", overwrite=overwrite) as handle:
        handle.write(table.getvalue())
    return json_path, csv_path

"""Re-check a saved audit result against the files that decided it.

An audit result records its evidence by SHA-256 (:class:`~monai_forget.audit.AuditResult`
provenance): the audited model file (``audit_trail.model_sha256``, written by the command
line) and every cache entry it read or wrote (``cache_entries``: reference-model weights
and prediction files). :func:`verify_result` hashes those files again. A match shows the
files are the ones the result was computed from; a change or a missing file shows the
evidence is no longer there to be checked (see ``docs/reference_auditor.md``, "Trust
model of the cache", for what this does and does not protect against).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from monai_forget.fingerprint import file_sha256
from monai_forget.results import Result

__all__ = ["Verification", "verify_result"]


@dataclass(frozen=True)
class Verification(Result):
    """What :func:`verify_result` found.

    Attributes:
        result: the result file checked.
        matched: files whose SHA-256 is the recorded one.
        changed: files whose SHA-256 differs from the recorded one.
        missing: recorded files that no longer exist.
    """

    result: str
    matched: tuple[str, ...]
    changed: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Every recorded file is there with its recorded SHA-256."""
        return bool(self.matched) and not self.changed and not self.missing

    def summary(self) -> str:
        n = len(self.matched) + len(self.changed) + len(self.missing)
        if self.ok:
            return f"{self.result}: all {n} recorded files match their SHA-256"
        lines = [
            f"{self.result}: {len(self.changed)} changed and {len(self.missing)} missing of "
            f"{n} recorded files; the result cannot be re-checked against them"
        ]
        lines += [f"  changed: {p}" for p in self.changed]
        lines += [f"  missing: {p}" for p in self.missing]
        return "\n".join(lines)


def _recorded(provenance: dict, model: str | os.PathLike | None) -> dict[str, str]:
    """Every file the result names, with its recorded SHA-256 (``model`` stands for the
    audited model file, e.g. after it moved)."""
    files = dict(provenance.get("cache_entries") or {})
    trail = provenance.get("audit_trail") or {}
    if trail.get("model_sha256"):
        files[str(model or trail["model_file"])] = trail["model_sha256"]
    elif model is not None:
        raise ValueError("the result records no model file (the command line records it)")
    return files


def verify_result(path: str | os.PathLike, model: str | os.PathLike | None = None) -> Verification:
    """Hash again every file ``path`` (a ``result.json``) records.

    Raises:
        FileNotFoundError: no such result.
        ValueError: not an audit result, or one that records no file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass the result.json of an audit")
    try:
        provenance = json.loads(path.read_text(encoding="utf-8"))["provenance"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path} is not an audit result (JSON with 'provenance')") from err
    files = _recorded(provenance, model)
    if not files:
        raise ValueError(
            f"{path} records no file to check: audit with `cache_dir` to keep the reference "
            "models and predictions that decide"
        )
    matched, changed, missing = [], [], []
    for name, digest in sorted(files.items()):
        if not Path(name).is_file():
            missing.append(name)
        elif file_sha256(name) != digest:
            changed.append(name)
        else:
            matched.append(name)
    return Verification(str(path), tuple(matched), tuple(changed), tuple(missing))

"""`audit verify` (issue 50, item 6): a saved result re-checked against its files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from monai_forget.audit.verify import verify_result


def _result(tmp_path: Path, files: dict[str, bytes]) -> Path:
    """A result.json recording ``files`` (the first as the model file) by SHA-256."""
    digests = {}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        digests[str(tmp_path / name)] = hashlib.sha256(data).hexdigest()
    model, *entries = digests
    provenance = {
        "audit_trail": {"model_file": model, "model_sha256": digests[model]},
        "cache_entries": {k: digests[k] for k in entries},
    }
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"decision": "forgotten", "provenance": provenance}))
    return path


def test_every_recorded_file_is_hashed_again(tmp_path):
    path = _result(tmp_path, {"target.pt": b"model", "ref0.pt": b"r0", "ref0.npz": b"p0"})
    found = verify_result(path)
    assert found.ok and len(found.matched) == 3 and "all 3 recorded files match" in found.summary()
    (tmp_path / "ref0.pt").write_bytes(b"the target posing as a reference")
    (tmp_path / "ref0.npz").unlink()
    found = verify_result(path)
    assert not found.ok
    assert found.changed == (str(tmp_path / "ref0.pt"),)
    assert found.missing == (str(tmp_path / "ref0.npz"),)
    assert "1 changed and 1 missing of 3 recorded files" in found.summary()


def test_a_moved_model_is_checked_where_it_is_now(tmp_path):
    path = _result(tmp_path, {"target.pt": b"model"})
    (tmp_path / "target.pt").rename(tmp_path / "moved.pt")
    assert verify_result(path).missing == (str(tmp_path / "target.pt"),)
    assert verify_result(path, tmp_path / "moved.pt").ok


def test_nothing_to_check_is_refused(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"provenance": {"cache_entries": {}}}))
    with pytest.raises(ValueError, match="records no file to check: audit with `cache_dir`"):
        verify_result(path)
    path.write_text("{}")
    with pytest.raises(ValueError, match="not an audit result"):
        verify_result(path)
    with pytest.raises(FileNotFoundError, match=r"result\.json of an audit"):
        verify_result(tmp_path / "missing.json")

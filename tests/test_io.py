"""Atomic, non-clobbering output."""

import os

import pytest

from monai_forget.io import atomic_write, check_writable


def test_written_file_has_normal_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "a.txt", "w") as handle:
            handle.write("x")
        with atomic_write(tmp_path / "b.txt", "w", durable=False) as handle:
            handle.write("y")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").read_text() == "y"


def test_failure_leaves_nothing_and_keeps_existing_file(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_write(path, overwrite=True) as handle:
        handle.write(b"half")
        raise RuntimeError("interrupted")
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_existing_output_needs_overwrite(tmp_path):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")
    with pytest.raises(FileExistsError, match="overwrite"):
        check_writable(path, overwrite=False)
    with atomic_write(path, overwrite=True) as handle:
        handle.write(b"new")
    assert path.read_bytes() == b"new"

"""Atomic, non-clobbering output."""

import os

import pytest

from monai_forget.io import atomic_write, check_output_files, check_writable


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


def test_file_created_meanwhile_is_never_replaced(tmp_path):
    path = tmp_path / "out.bin"
    with pytest.raises(FileExistsError, match="appeared"), atomic_write(path) as handle:
        handle.write(b"mine")
        path.write_bytes(b"theirs")  # another writer wins the race after the check
    assert path.read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_exclusive_without_hard_links(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")  # e.g. FAT or a network share

    monkeypatch.setattr(os, "link", no_links)
    with atomic_write(tmp_path / "new.bin") as handle:
        handle.write(b"mine")
    assert (tmp_path / "new.bin").read_bytes() == b"mine"
    path = tmp_path / "taken.bin"
    with pytest.raises(FileExistsError), atomic_write(path) as handle:
        handle.write(b"mine")
        path.write_bytes(b"theirs")
    assert path.read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.bin", "taken.bin"]


def test_a_report_folders_files_are_all_checked_before_any_is_written(tmp_path):
    """Both outputs of a report are refused together: the second existing stops the
    first's check from passing alone, and a file given as the folder is named."""
    out = tmp_path / "scan"
    out.mkdir()
    (out / "b.html").write_text("kept")
    with pytest.raises(FileExistsError, match=r"b\.html"):
        check_output_files(out, ("a.json", "b.html"), False, "scan outputs")
    assert not (out / "a.json").exists() and (out / "b.html").read_text() == "kept"
    assert check_output_files(out, ("a.json", "b.html"), True, "scan outputs") == (
        out / "a.json",
        out / "b.html",
    )
    with pytest.raises(ValueError, match="is a file; pass a folder for the scan outputs"):
        check_output_files(out / "b.html", ("a.json",), True, "scan outputs")

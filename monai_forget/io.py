"""Atomic, non-clobbering file output shared by every writer in the package."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def check_writable(path: str | os.PathLike, overwrite: bool) -> Path:
    """Return ``path`` as a ``Path`` or refuse to replace an existing file.

    Raises:
        FileExistsError: ``path`` exists and ``overwrite`` is false.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(
            f"{path} already exists; pass overwrite=True (CLI: --overwrite) to replace it"
        )
    return path


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike, mode: str = "wb", overwrite: bool = False
) -> Iterator[IO]:
    """Open a temporary file next to ``path`` and move it into place on success.

    Nothing is left behind when the body raises: the temporary file is removed and any
    existing ``path`` is untouched.
    """
    path = check_writable(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise

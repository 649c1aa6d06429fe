"""Model files read safely: TorchScript archives, or state dicts through
``torch.load(weights_only=True)``; a missing, empty, truncated or damaged file and one
holding pickled Python objects are each refused with their own message.
"""

from __future__ import annotations

import os
import pickle
import pickletools
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import torch

__all__ = ["UnsafeModelError", "check_model_file", "damaged", "is_torchscript", "load_state_dict"]


class UnsafeModelError(ValueError):
    """A model file needs arbitrary unpickling, which is refused."""


def check_model_file(path: str | os.PathLike) -> Path:
    """The model file as a ``Path``; refuses a missing path, a folder and an empty file."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"model path {path} is a folder; give the model file itself")
    if not path.is_file():
        raise FileNotFoundError(f"model file {path} does not exist")
    if path.stat().st_size == 0:
        raise ValueError(f"model file {path} is empty (0 bytes); save or copy it again")
    return path


def damaged(path: Path) -> ValueError:
    """Neither a complete PyTorch checkpoint nor a TorchScript archive (names which it was)."""
    with path.open("rb") as handle:
        head = handle.read(1 << 20)
    data = _data_file(path, head)
    if data:
        return ValueError(
            f"model file {path} is {data}, not a model; give the model's weights (a state "
            "dict or a TorchScript archive) here and the data file where the command takes "
            "data"
        )
    script = b"constants.pkl" in head or b"/code/__torch__" in head
    kind = "TorchScript archive" if script else "PyTorch (zip) checkpoint"
    what = f"looks like a {kind} but is incomplete" if head[:2] == b"PK" else "is not a model"
    return ValueError(f"model file {path} {what} (truncated or damaged?); save or copy it again")


def _data_file(path: Path, head: bytes) -> str:
    """What a data file given as a model is ("" when it is none of them)."""
    if head.startswith(b"\x93NUMPY"):
        return "a NumPy .npy array file"
    if head[:2] == b"PK":
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError):
            return ""
        if names and all(n.endswith(".npy") for n in names):
            return "a NumPy .npz data file (arrays: " + ", ".join(n[:-4] for n in names[:4]) + ")"
    if head[128:132] == b"DICM":
        return "a DICOM image"
    return ""


def load_state_dict(
    path: str | os.PathLike, map_location: str | torch.device = "cpu"
) -> Mapping[str, torch.Tensor]:
    """The state dict in ``path`` (raw, or under ``"state_dict"``/``"model"``), read with
    ``torch.load(weights_only=True)``.

    Raises:
        UnsafeModelError: the file holds pickled Python objects.
        ValueError: an empty, truncated or damaged file, or no state dict in it.
    """
    path = check_model_file(path)
    try:
        obj = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        found = _refused_global(str(err)) or _global_in_raw_pickle(path)
        if found is None:  # not a refused object: bytes that no unpickler reads
            raise damaged(path) from None
        raise UnsafeModelError(
            f"{path} contains pickled Python objects, which are refused for safety "
            "(loading them could run arbitrary code). Save the weights with "
            "torch.save(model.state_dict(), path) or a TorchScript archive with "
            f"torch.jit.save(torch.jit.script(model), path). Details: it refers to {found}"
        ) from None
    except (RuntimeError, EOFError, OSError, KeyError, ValueError):
        raise damaged(path) from None
    if isinstance(obj, Mapping):
        for key in ("state_dict", "model"):
            if isinstance(obj.get(key), Mapping):
                obj = obj[key]
                break
    if not isinstance(obj, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()
    ):
        raise ValueError(
            f"{path} is not a state dict (name -> tensor), nor a dict holding one under "
            "'state_dict' or 'model'; save model.state_dict() or a TorchScript archive"
        )
    return obj


def _refused_global(message: str) -> str | None:
    """The Python object torch's weights-only unpickler refused, from its message; torch
    words it two ways ("Unsupported global: GLOBAL x" and "unsupported GLOBAL x whose
    module is blocked"), so both are read."""
    found = re.search(r"unsupported global:?\s+(?:GLOBAL\s+)?([\w.]+)", message, re.IGNORECASE)
    return found.group(1) if found else None


def _global_in_raw_pickle(path: Path) -> str | None:
    """The first Python object a plain (non-torch) pickle file refers to, or None.

    torch stops at the framing opcode of protocol 4+ before it meets any object, so its
    message cannot tell a pickle payload from damage; the stream's opcodes can.
    """
    with path.open("rb") as handle:
        data = handle.read(1 << 24)
    strings: list[str] = []
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in ("GLOBAL", "INST"):
                return str(arg).replace(" ", ".")
            if opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                return f"{strings[-2]}.{strings[-1]}"
            if isinstance(arg, str):
                strings.append(arg)
    except (ValueError, EOFError, pickle.UnpicklingError):
        return None  # not a pickle stream past this point
    return None


def is_torchscript(path: Path) -> bool:
    """A TorchScript archive is a zip holding ``<name>/constants.pkl`` or ``code/``."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    return any(n.endswith("/constants.pkl") or "/code/" in n for n in names)

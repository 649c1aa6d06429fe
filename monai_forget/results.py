"""One result shape: JSON-ready values, provenance, and saving.

Every result the package hands to users (audits, references, scores, scans, withdrawal
evaluations) is a dataclass with ``to_dict()``, ``summary()`` and ``save(path)``. They
share :class:`Result` for the last two and :func:`jsonable` for the first, so there is
one rule for numpy/torch values and non-finite floats, and one way to write a file
(atomically, never replacing one without ``overwrite``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from monai_forget.io import atomic_write

__all__ = ["Result", "jsonable", "package_versions", "to_json", "write_json"]


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types, recursively.

    numpy arrays/scalars and torch tensors become lists/numbers, paths and devices
    strings, dataclasses dicts; non-finite floats become the strings ``"inf"``,
    ``"-inf"`` and ``"nan"`` (JSON has no literal for them; ``float("inf")`` reads them
    back). Anything else that JSON cannot hold raises ``TypeError`` when written.
    """
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict"):
            return jsonable(value.to_dict())
        return jsonable(dataclasses.asdict(value))
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor, without torch
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, os.PathLike) or type(value).__name__ == "device":
        return str(value)
    return value


def to_json(value: Any, indent: int | None = 2) -> str:
    """``value`` as JSON text (through :func:`jsonable`; strict: no NaN literals)."""
    return json.dumps(jsonable(value), indent=indent, allow_nan=False)


def write_json(path: str | os.PathLike, value: Any, *, overwrite: bool = False) -> Path:
    """Write ``value`` as JSON atomically; an existing file is refused unless ``overwrite``."""
    text = to_json(value)
    with atomic_write(path, "w", overwrite=overwrite) as handle:
        handle.write(text + "\n")
    return Path(path)


def package_versions() -> dict[str, str]:
    """Versions of the packages whose behaviour a result depends on (for provenance)."""
    import monai
    import scipy
    import torch

    from monai_forget import __version__

    return {
        "monai-forget": __version__,
        "monai": monai.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
    }


class Result:
    """Mixin for result dataclasses: ``to_dict``, ``to_json``, ``save``, ``summary``."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON types."""
        return jsonable(dataclasses.asdict(self))  # type: ignore[call-overload]

    def to_json(self, indent: int | None = 2) -> str:
        return to_json(self.to_dict(), indent)

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the result as JSON, atomically; refuses to replace a file unless asked."""
        return write_json(path, self.to_dict(), overwrite=overwrite)

    def summary(self) -> str:
        """One or a few sentences in plain words."""
        raise NotImplementedError

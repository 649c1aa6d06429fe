"""The exposure audit's record: ``exposure.json`` and the exposure-by-copies figure."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

from monai_forget.io import atomic_write, check_output_files
from monai_forget.memorisation.exposure import ExposureAudit
from monai_forget.results import write_json

__all__ = ["JSON_NAME", "PNG_NAME", "exposure_figure", "write_exposure_report"]

JSON_NAME = "exposure.json"
PNG_NAME = "exposure.png"


def exposure_figure(audit: ExposureAudit):
    """Each canary's exposure (bits) against its copies, with the 99th percentile of the
    never-planted canaries (``log2 100``) and the most the rank can show (``log2(n+1)``)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    rows = audit.canaries
    copies = np.array([c.copies for c in rows], dtype=float)
    jitter = np.exp(np.random.default_rng(0).uniform(-0.06, 0.06, len(rows)))
    flagged = np.array([c.significant for c in rows])
    exposure = np.array([c.exposure for c in rows])
    extrapolated = np.array([c.exposure_extrapolated for c in rows])
    ax.scatter(copies * jitter, np.minimum(extrapolated, 64), marker="o", facecolors="none",
               edgecolors="grey", label="extrapolated (skew-normal)")  # fmt: skip
    for mask, colour, label in [(~flagged, "#1f77b4", "by rank"), (flagged, "#d62728", "flagged")]:
        if mask.any():
            ax.scatter(copies[mask] * jitter[mask], exposure[mask], color=colour, label=label)
    ceiling = math.log2(rows[0].n_never_planted + 1)
    ax.axhline(ceiling, color="black", lw=0.8, ls=":", label=f"rank's ceiling ({ceiling:.1f})")
    ax.axhline(math.log2(100), color="#d62728", lw=0.8, ls="--",
               label="99th percentile of never-planted")  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(sorted(set(copies)), [str(int(c)) for c in sorted(set(copies))])
    ax.set_xlabel("training images carrying the canary (copies)")
    ax.set_ylabel("exposure (bits)")
    ax.set_title(f"canary exposure, space {audit.space} ({audit.space_size:,} texts)")
    ax.legend(fontsize=7, loc="upper left")
    return fig


def write_exposure_report(
    audit: ExposureAudit, out_dir: str | Path, *, overwrite: bool = False
) -> tuple[Path, Path]:
    """Write :data:`JSON_NAME` and :data:`PNG_NAME` into ``out_dir``, atomically; both
    are checked before either is written.

    Raises:
        FileExistsError: an output exists and ``overwrite`` is false.
    """
    json_path, png_path = check_output_files(
        out_dir, (JSON_NAME, PNG_NAME), overwrite, "exposure outputs"
    )
    import matplotlib.pyplot as plt

    fig = exposure_figure(audit)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    write_json(json_path, audit.to_dict(), overwrite=overwrite)
    with atomic_write(png_path, "wb", overwrite=overwrite) as handle:
        handle.write(buffer.getvalue())
    return json_path, png_path

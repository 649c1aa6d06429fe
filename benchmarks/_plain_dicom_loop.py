"""The baseline of ``dicom_injector.py``: a plain pydicom loop that stamps a 5x5 block.

Run as a script (``python _plain_dicom_loop.py IN OUT``) it imports pydicom only, so
its whole-process time is what a minimal script would take.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pydicom


def plain_loop(src: Path, dst: Path) -> None:
    """Read each file of ``src``, set a 5x5 block to the image maximum, save to ``dst``."""
    dst.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.iterdir()):
        ds = pydicom.dcmread(path)
        pixels = ds.pixel_array.copy()
        pixels[1:6, 1:6] = pixels.max()
        ds.PixelData = pixels.tobytes()
        ds.save_as(dst / path.name)


if __name__ == "__main__":
    plain_loop(Path(sys.argv[1]), Path(sys.argv[2]))

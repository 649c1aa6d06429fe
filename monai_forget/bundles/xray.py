"""Chest X-ray pixels as the bundle's model saw them in training: 8-bit display values.

The chest X-ray bundle trains on 8-bit images (PNG exports, 0..255). A DICOM radiograph
stores 10- to 16-bit values that are shown through the modality LUT (rescale), the VOI
window or LUT, and, for ``MONOCHROME1``, an inversion (0 is white). Read as raw numbers
and scaled as 0..255, such an image becomes nearly all white and the model's answer is
meaningless. :class:`DisplayDicomReader` therefore reads DICOM files the way a viewer
shows them, mapped to 0..255, and :class:`CheckIntensityRanged` refuses any other image
whose values fall outside the range the model was trained on, instead of clipping it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from monai.data import PydicomReader
from monai.transforms import MapTransform

__all__ = ["CheckIntensityRanged", "DisplayDicomReader", "display_values"]


def display_values(dataset: Any, levels: int = 256) -> np.ndarray:
    """The displayed grey levels of a single-frame DICOM image, as float32 ``0..levels-1``.

    Applies the modality LUT (Rescale Slope/Intercept), then the VOI LUT or window
    (``WindowCenter``/``WindowWidth``; without one, the image's own min..max), and
    inverts ``MONOCHROME1`` so that larger values are brighter, as in the training PNGs.

    Raises:
        ValueError: a multi-frame file, or a colour image (X-rays are grey).
    """
    from pydicom.pixels import apply_modality_lut, apply_voi_lut

    frames = int(getattr(dataset, "NumberOfFrames", 1) or 1)
    if frames > 1:
        raise ValueError(f"a multi-frame DICOM ({frames} frames); give single radiographs")
    if int(getattr(dataset, "SamplesPerPixel", 1)) != 1:
        raise ValueError("a colour DICOM; a chest X-ray is expected to be greyscale")
    values = np.asarray(apply_modality_lut(dataset.pixel_array, dataset), dtype=np.float64)
    if "VOILUTSequence" in dataset:  # a lookup table: its output spans the display range
        values = np.asarray(apply_voi_lut(values, dataset), dtype=np.float64)
    if "WindowCenter" in dataset and "VOILUTSequence" not in dataset:
        center = float(np.ravel(dataset.WindowCenter)[0])
        width = float(np.ravel(dataset.WindowWidth)[0])
        low, high = center - width / 2, center + width / 2
    else:
        low, high = float(values.min()), float(values.max())
    scaled = np.clip((values - low) / max(high - low, 1e-12), 0.0, 1.0)
    if str(getattr(dataset, "PhotometricInterpretation", "")).upper() == "MONOCHROME1":
        scaled = 1.0 - scaled
    return (scaled * (levels - 1)).astype(np.float32)


class DisplayDicomReader(PydicomReader):
    """MONAI's ``PydicomReader`` returning :func:`display_values` (0..255) of each file,
    for ``LoadImaged(reader=[DisplayDicomReader(), "PILReader"])``. ``LoadImage`` tries the
    last reader first: PNGs, the common case, are then read without a failed DICOM
    attempt logged for each file."""

    def _get_array_data(self, img: Any, filename: Any) -> np.ndarray:
        try:
            return display_values(img)
        except ValueError as err:
            raise ValueError(f"{filename}: {err}") from None


class CheckIntensityRanged(MapTransform):
    """Refuse an image whose values fall outside ``[minimum, maximum]``, naming the file.

    Placed before ``ScaleIntensityRanged(..., clip=True)``, it turns a silent clip (a
    16-bit image squashed to white) into an error that says what to do.

    Args:
        keys: the image key(s).
        maximum: the largest value the model was trained on (255 for 8-bit images).
        minimum: the smallest.
        source_key: the key holding the file name, for the message.
    """

    def __init__(
        self,
        keys: Sequence[Hashable] | Hashable,
        maximum: float,
        minimum: float = 0.0,
        source_key: str = "image_path",
    ) -> None:
        super().__init__(keys)
        self.minimum, self.maximum, self.source_key = float(minimum), float(maximum), source_key

    def __call__(self, data: Mapping[Hashable, Any]) -> dict[Hashable, Any]:
        out = dict(data)
        for key in self.key_iterator(out):
            image = out[key]
            low, high = float(image.min()), float(image.max())
            if low < self.minimum or high > self.maximum:
                name = out.get(self.source_key) or getattr(image, "meta", {}).get(
                    "filename_or_obj", key
                )
                raise ValueError(
                    f"{name}: pixel values {low:g}..{high:g} fall outside {self.minimum:g}.."
                    f"{self.maximum:g}, the range this model was trained on (8-bit images); "
                    "export the image as 8-bit with its display window (DICOM files are "
                    "windowed automatically) rather than letting it be clipped"
                )
        return out

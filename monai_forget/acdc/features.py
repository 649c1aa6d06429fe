"""Clinical features of a patient's ED and ES segmentations, for the diagnosis.

After Isensee et al., "Automatic cardiac disease assessment on cine-MRI via time-series
segmentation and domain specific features" (STACOM 2017, Sec. 2.3): the classifier sees
volumes, ejection fractions, volume ratios and myocardial thickness computed from the
segmentation of the end-diastole (ED) and end-systole (ES) frames.

The SSL4MIS h5 release carries no voxel size, so the default features are
**spacing-free**: ratios of volumes of one patient (the voxel volume cancels) and
in-plane lengths divided by an in-plane length (pixels are square). When the voxel size
is known (the NIfTI release's header), :func:`absolute_features` adds volumes in ml,
the myocardial mass and the thickness in mm.

Thickness: on every short-axis slice, the myocardium's local thickness at each pixel of
its skeleton (``skimage.morphology.skeletonize``) is twice the distance to the nearest
pixel outside it (``scipy.ndimage.distance_transform_edt``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from monai_forget.acdc.volumes import MASK_LABELS

__all__ = [
    "ABSOLUTE_FEATURES",
    "FEATURES",
    "MYOCARDIUM_DENSITY",
    "absolute_features",
    "patient_features",
]

RV, MYO, LV = 1, 2, 3
#: g/ml, the density used for the myocardial mass (Isensee et al. 2017).
MYOCARDIUM_DENSITY = 1.05

#: Spacing-free features, in the order of the feature vector.
FEATURES: tuple[str, ...] = (
    "lv_ef",  # (LV_ED - LV_ES) / LV_ED
    "rv_ef",  # (RV_ED - RV_ES) / RV_ED
    "rv_lv_ed",  # RV / LV cavity volume at ED
    "rv_lv_es",  # RV / LV cavity volume at ES
    "myo_lv_ed",  # myocardium / LV cavity volume at ED
    "myo_lv_es",  # myocardium / LV cavity volume at ES
    "myo_es_ed",  # myocardium volume ES / ED
    "rv_es_lv_ed",  # RV at ES / LV cavity at ED
    "wall_max_ed",  # max myocardial thickness at ED / LV ED diameter
    "wall_mean_ed",  # mean myocardial thickness at ED / LV ED diameter
    "wall_cv_ed",  # thickness heterogeneity at ED: mean over slices of std / mean
    "wall_max_es",  # max myocardial thickness at ES / LV ED diameter
    "wall_thickening",  # mean thickness ES / ED (systolic thickening)
    "lv_slice_ef_std",  # spread of the per-slice LV area change (regional function)
)
#: Features needing the voxel size (mm): volumes in ml, mass in g, thickness in mm.
ABSOLUTE_FEATURES: tuple[str, ...] = (
    "lv_edv_ml",
    "lv_esv_ml",
    "rv_edv_ml",
    "rv_esv_ml",
    "myo_mass_g",
    "wall_max_ed_mm",
)


def _check(mask: np.ndarray, patient: str, phase: str) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.ndim != 3:
        raise ValueError(f"{patient} {phase}: the mask must be (H, W, D), got {mask.shape}")
    unknown = sorted(set(np.unique(mask).tolist()) - set(MASK_LABELS))
    if unknown:
        raise ValueError(f"{patient} {phase}: mask has unknown label(s) {unknown}")
    for label in (RV, MYO, LV):
        if not np.any(mask == label):
            raise ValueError(
                f"{patient} {phase}: the mask has no {MASK_LABELS[label]}; the features need "
                "every structure (a failed segmentation?)"
            )
    return mask


def _thickness_per_slice(mask: np.ndarray) -> list[np.ndarray]:
    """Local myocardial thickness (pixels) at the skeleton pixels of every slice with MYO."""
    from scipy.ndimage import distance_transform_edt
    from skimage.morphology import skeletonize

    out = []
    for z in range(mask.shape[-1]):
        rows, cols = np.nonzero(mask[..., z] == MYO)
        if len(rows) < 3:
            continue
        # The myocardium's bounding box, one background pixel around it: same result,
        # a fraction of the pixels.
        myo = np.pad(mask[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1, z] == MYO, 1)
        skeleton = skeletonize(myo)
        if skeleton.any():
            out.append(2.0 * distance_transform_edt(myo)[skeleton])
    return out


def _lv_diameter(mask: np.ndarray) -> float:
    """Equivalent diameter (pixels) of the largest LV cavity cross-section."""
    areas = (mask == LV).sum(axis=(0, 1))
    return float(2.0 * np.sqrt(areas.max() / np.pi))


def patient_features(ed: np.ndarray, es: np.ndarray, patient: str = "patient") -> dict[str, float]:
    """The spacing-free :data:`FEATURES` of one patient's ED and ES masks.

    Args:
        ed: ``(H, W, D)`` labels (0 background, 1 RV, 2 MYO, 3 LV) at end-diastole.
        es: the same at end-systole (same slices).
        patient: named in errors.

    Raises:
        ValueError: masks of other shapes or labels, or a phase missing a structure.
    """
    ed, es = _check(ed, patient, "ED"), _check(es, patient, "ES")
    if ed.shape != es.shape:
        raise ValueError(f"{patient}: ED mask {ed.shape} and ES mask {es.shape} differ in shape")
    vol = {
        (phase, label): float(np.sum(m == label))
        for phase, m in (("ED", ed), ("ES", es))
        for label in (RV, MYO, LV)
    }
    diameter = _lv_diameter(ed)
    thick = {phase: _thickness_per_slice(m) for phase, m in (("ED", ed), ("ES", es))}
    mean_thick = {p: float(np.mean(np.concatenate(t))) for p, t in thick.items()}
    lv_ed_area = (ed == LV).sum(axis=(0, 1)).astype(float)
    lv_es_area = (es == LV).sum(axis=(0, 1)).astype(float)
    present = lv_ed_area > 0
    slice_ef = (lv_ed_area[present] - lv_es_area[present]) / lv_ed_area[present]
    return {
        "lv_ef": (vol["ED", LV] - vol["ES", LV]) / vol["ED", LV],
        "rv_ef": (vol["ED", RV] - vol["ES", RV]) / vol["ED", RV],
        "rv_lv_ed": vol["ED", RV] / vol["ED", LV],
        "rv_lv_es": vol["ES", RV] / vol["ES", LV],
        "myo_lv_ed": vol["ED", MYO] / vol["ED", LV],
        "myo_lv_es": vol["ES", MYO] / vol["ES", LV],
        "myo_es_ed": vol["ES", MYO] / vol["ED", MYO],
        "rv_es_lv_ed": vol["ES", RV] / vol["ED", LV],
        "wall_max_ed": max(float(t.max()) for t in thick["ED"]) / diameter,
        "wall_mean_ed": mean_thick["ED"] / diameter,
        "wall_cv_ed": float(np.mean([t.std() / t.mean() for t in thick["ED"]])),
        "wall_max_es": max(float(t.max()) for t in thick["ES"]) / diameter,
        "wall_thickening": mean_thick["ES"] / mean_thick["ED"],
        "lv_slice_ef_std": float(np.std(slice_ef)),
    }


def absolute_features(
    ed: np.ndarray, es: np.ndarray, spacing: Sequence[float], patient: str = "patient"
) -> dict[str, float]:
    """:data:`ABSOLUTE_FEATURES` from the voxel size ``(x, y, z)`` in mm (NIfTI header).

    Raises:
        ValueError: a voxel size that is not three positive numbers, or an in-plane
            voxel that is not square (the thickness needs one in-plane pixel size).
    """
    spacing = tuple(float(s) for s in spacing)
    if len(spacing) != 3 or min(spacing) <= 0 or not np.all(np.isfinite(spacing)):
        raise ValueError(f"{patient}: voxel size must be three positive mm values, got {spacing}")
    if not np.isclose(spacing[0], spacing[1], rtol=1e-3):
        raise ValueError(f"{patient}: in-plane voxel {spacing[:2]} is not square")
    ed, es = _check(ed, patient, "ED"), _check(es, patient, "ES")
    ml = float(np.prod(spacing)) / 1000.0
    thick = _thickness_per_slice(ed)
    return {
        "lv_edv_ml": float(np.sum(ed == LV)) * ml,
        "lv_esv_ml": float(np.sum(es == LV)) * ml,
        "rv_edv_ml": float(np.sum(ed == RV)) * ml,
        "rv_esv_ml": float(np.sum(es == RV)) * ml,
        "myo_mass_g": float(np.sum(ed == MYO)) * ml * MYOCARDIUM_DENSITY,
        "wall_max_ed_mm": max(float(t.max()) for t in thick) * spacing[0],
    }


def feature_matrix(
    rows: Sequence[Mapping[str, float]], names: Sequence[str] = FEATURES
) -> np.ndarray:
    """``(N, F)`` float64 matrix of feature dicts, in the order of ``names``.

    Raises:
        ValueError: a row missing a feature or holding a non-finite value.
    """
    matrix = np.empty((len(rows), len(names)), dtype=np.float64)
    for i, row in enumerate(rows):
        missing = [n for n in names if n not in row]
        if missing:
            raise ValueError(f"feature row {i} lacks {missing}")
        matrix[i] = [float(row[n]) for n in names]
    if not np.all(np.isfinite(matrix)):
        bad = sorted({names[j] for j in np.argwhere(~np.isfinite(matrix))[:, 1]})
        raise ValueError(f"non-finite feature values in {bad}")
    return matrix

"""ACDC as a cardiologist's pipeline: volumes from slice entries (with the errors a
volume pipeline needs), clinical features and the diagnosis classifier. The pathology
bundle's diagnosis configs run as a user types them in tests/test_segmentation_bundle.py
(the segmentation bundle's docs show them)."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from monai_forget.acdc import (
    FEATURES,
    DiagnosisClassifier,
    LoadACDCVolumed,
    absolute_features,
    check_mask_labels,
    group_volumes,
    patient_features,
    read_volume,
)
from monai_forget.data_prep.reading import LoadReferencedSliced


def _disc(shape: tuple[int, int], centre: tuple[float, float], radius: float) -> np.ndarray:
    yy, xx = np.mgrid[: shape[0], : shape[1]]
    return (yy - centre[0]) ** 2 + (xx - centre[1]) ** 2 <= radius**2


def heart(
    shape: tuple[int, int] = (64, 72),
    depth: int = 4,
    lv: float = 10.0,
    wall: float = 4.0,
    rv: float = 8.0,
    scale: int = 1,
) -> np.ndarray:
    """A synthetic (H, W, D) mask: LV disc, myocardial ring of width ``wall``, RV disc."""
    h, w = shape[0] * scale, shape[1] * scale
    centre = (h / 2, w / 2)
    mask = np.zeros((h, w, depth), dtype=np.uint8)
    for z in range(depth):
        taper = 1.0 - 0.15 * z  # apex-ward slices are smaller
        outer = _disc((h, w), centre, (lv + wall) * taper * scale)
        cavity = _disc((h, w), centre, lv * taper * scale)
        right = _disc((h, w), (centre[0], centre[1] - (lv + wall + rv) * scale), rv * taper * scale)
        mask[..., z][right] = 1
        mask[..., z][outer] = 2
        mask[..., z][cavity] = 3
    return mask


def write_patient(folder: Path, patient: str, masks: dict[int, np.ndarray], slices: bool) -> None:
    """h5 files of the SSL4MIS layout: one per slice, or one volume per frame."""
    folder.mkdir(parents=True, exist_ok=True)
    for frame, mask in masks.items():
        image = (mask / 3.0).astype(np.float32)
        if slices:
            for z in range(mask.shape[-1]):
                with h5py.File(folder / f"{patient}_frame{frame:02d}_slice_{z + 1}.h5", "w") as f:
                    f["image"], f["label"] = image[..., z], mask[..., z]
        else:
            with h5py.File(folder / f"{patient}_frame{frame:02d}.h5", "w") as f:
                f["image"] = np.moveaxis(image, -1, 0)
                f["label"] = np.moveaxis(mask, -1, 0)


def slice_entries(folder: Path, patient: str, frames=(1, 2), depth: int = 4, volume=False):
    out = []
    for frame in frames:
        for z in range(depth):
            name = f"{patient}_frame{frame:02d}" + ("" if volume else f"_slice_{z + 1}") + ".h5"
            out.append(
                {
                    "image": str(folder / name),
                    "seg": str(folder / name),
                    "patient": patient,
                    "phase": {1: "ED", 2: "ES"}[frame],
                    "label": 2,
                    "slice": z,
                    "slice_axis": 0 if volume else None,
                }
            )
    return out


# --------------------------------------------------------------------------------------
# Volumes and the errors a volume pipeline needs
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("volume", [False, True], ids=["slice files", "volume file"])
def test_slices_regroup_into_volumes_in_slice_order(tmp_path: Path, volume: bool) -> None:
    ed, es = heart(), heart(lv=7.0, wall=5.0)
    write_patient(tmp_path, "patient001", {1: ed, 2: es}, slices=not volume)
    entries = slice_entries(tmp_path, "patient001", volume=volume)
    before = json.dumps(entries)
    volumes = group_volumes(list(reversed(entries)))
    assert json.dumps(entries) == before  # inputs untouched
    assert [(v["patient"], v["phase"]) for v in volumes] == [
        ("patient001", "ED"),
        ("patient001", "ES"),
    ]
    assert [s["slice"] for s in volumes[0]["sources"]] == [0, 1, 2, 3]
    read = read_volume(volumes[1])
    assert read.image.shape == read.mask.shape == es.shape  # (H, W, D), short axis last
    np.testing.assert_array_equal(read.mask, es)
    assert read.spacing is None and np.array_equal(read.affine, np.eye(4))
    loaded = LoadACDCVolumed()(volumes[0])
    assert tuple(loaded["image"].shape) == (1, *ed.shape)
    assert loaded["image"].meta["filename_or_obj"] == "patient001_ED"
    np.testing.assert_array_equal(loaded["label"][0].numpy(), ed)


def test_volume_without_es_names_the_patient_and_file(tmp_path: Path) -> None:
    write_patient(tmp_path, "patient007", {1: heart()}, slices=True)
    entries = slice_entries(tmp_path, "patient007", frames=(1,))
    with pytest.raises(
        ValueError, match=r"patient007 has no ES volume.*patient007_frame01_slice_1\.h5"
    ):
        group_volumes(entries, name="test")
    assert len(group_volumes(entries, phases=None)) == 1  # a single phase when asked


def test_missing_and_repeated_slices_name_the_patient_and_file(tmp_path: Path) -> None:
    write_patient(tmp_path, "patient003", {1: heart(), 2: heart()}, slices=True)
    entries = slice_entries(tmp_path, "patient003")
    gap = [e for e in entries if not (e["phase"] == "ES" and e["slice"] == 2)]
    with pytest.raises(
        ValueError,
        match=r"patient003 ES, .*patient003_frame02_slice_1\.h5.*missing slice\(s\) \[2\]",
    ):
        group_volumes(gap)
    with pytest.raises(ValueError, match=r"patient003 ED.*repeated slice\(s\) \[1\]"):
        group_volumes([*entries, dict(entries[1])])
    last = [e for e in entries if not (e["phase"] == "ES" and e["slice"] == 3)]
    with pytest.raises(ValueError, match=r"patient003 has \{'ED': 4, 'ES': 3\} slices"):
        group_volumes(last)
    # A volume file listed with fewer slices than it holds is refused when read.
    write_patient(tmp_path / "v", "patient004", {1: heart(), 2: heart()}, slices=False)
    short = slice_entries(tmp_path / "v", "patient004", volume=True)[:3]
    volume = group_volumes(short, phases=None)[0]
    with pytest.raises(
        ValueError, match=r"patient004 ED, .*patient004_frame01\.h5: .*lists 3 slices"
    ):
        read_volume(volume)


def test_unknown_mask_labels_name_the_patient_and_file(tmp_path: Path) -> None:
    bad = heart()
    bad[0, 0, 1] = 7
    write_patient(tmp_path, "patient009", {1: bad, 2: heart()}, slices=True)
    entries = slice_entries(tmp_path, "patient009")
    with pytest.raises(
        ValueError,
        match=r"patient009 ED, .*patient009_frame01_slice_1\.h5: .*unknown label\(s\) \[7\]",
    ):
        read_volume(group_volumes(entries)[0])
    # The 2D training path checks each slice it loads.
    loader = LoadReferencedSliced(keys=("image", "seg"), mask_keys=("seg",))
    with pytest.raises(
        ValueError, match=r"patient009 ED slice 1, .*patient009_frame01_slice_2\.h5: .*\[7\]"
    ):
        loader(entries[1])
    assert loader(entries[0])["seg"].shape == (1, 64, 72)
    with pytest.raises(ValueError, match="unknown label"):
        check_mask_labels(np.array([0, 1, 4]), "here")


# --------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------


def test_features_follow_the_masks_and_do_not_depend_on_the_pixel_size() -> None:
    ed, es = heart(lv=10.0, wall=4.0), heart(lv=7.0, wall=5.5)
    f = patient_features(ed, es, "p")
    assert list(f) == list(FEATURES)
    lv_ed, lv_es = np.sum(ed == 3), np.sum(es == 3)
    assert f["lv_ef"] == pytest.approx((lv_ed - lv_es) / lv_ed)
    assert f["rv_lv_ed"] == pytest.approx(np.sum(ed == 1) / lv_ed)
    assert f["myo_lv_es"] == pytest.approx(np.sum(es == 2) / lv_es)
    # Wall thickness ~4 px against an LV ED diameter of ~20 px.
    assert f["wall_mean_ed"] == pytest.approx(4.0 / 20.0, rel=0.3)
    assert f["wall_thickening"] > 1.0  # thicker at ES
    # The same hearts at twice the resolution: the spacing-free features barely move.
    g = patient_features(heart(lv=10.0, wall=4.0, scale=2), heart(lv=7.0, wall=5.5, scale=2))
    for name in ("lv_ef", "rv_lv_ed", "myo_lv_ed", "wall_mean_ed", "wall_thickening"):
        assert g[name] == pytest.approx(f[name], rel=0.1, abs=0.02), name
    # Absolute features scale with the voxel size.
    a1, a2 = absolute_features(ed, es, (1.0, 1.0, 5.0)), absolute_features(ed, es, (2.0, 2.0, 5.0))
    assert a2["lv_edv_ml"] == pytest.approx(4 * a1["lv_edv_ml"])
    assert a1["lv_edv_ml"] == pytest.approx(lv_ed * 5.0 / 1000.0)
    assert a2["wall_max_ed_mm"] == pytest.approx(2 * a1["wall_max_ed_mm"])
    with pytest.raises(ValueError, match="not square"):
        absolute_features(ed, es, (1.0, 1.5, 5.0))


def _blocks(structures: list[list[tuple[int, int, int, int, int]]]) -> np.ndarray:
    """A (40, 40, D) mask from rectangles ``(label, row, col, height, width)`` per slice."""
    mask = np.zeros((40, 40, len(structures)), dtype=np.uint8)
    for z, blocks in enumerate(structures):
        for label, row, col, height, width in blocks:
            mask[row : row + height, col : col + width, z] = label
    return mask


def test_every_feature_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each of the 14 features from volumes and areas counted by hand (rectangles) and a
    given per-slice thickness, so a feature that divides by the wrong structure or phase
    fails; the thickness itself is checked on a geometry whose value is known exactly."""
    from monai_forget.acdc import features

    # ED: LV 10x10 + 5x10 = 150, RV 6x5 + 4x5 = 50, MYO 43 (3 lines of 9 + 16);
    # ES: LV 4x10 + 3x10 = 70, RV 3x5 + 2x5 = 25, MYO 25 + 25 = 50.
    ed = _blocks([
        [(3, 2, 2, 10, 10), (1, 20, 2, 6, 5), (2, 30, 2, 1, 9), (2, 33, 2, 1, 16)],
        [(3, 2, 2, 5, 10), (1, 20, 2, 4, 5), (2, 30, 2, 2, 9)],
    ])  # fmt: skip
    es = _blocks([
        [(3, 2, 2, 4, 10), (1, 20, 2, 3, 5), (2, 30, 2, 5, 5)],
        [(3, 2, 2, 3, 10), (1, 20, 2, 2, 5), (2, 30, 2, 5, 5)],
    ])  # fmt: skip
    given = {
        "ED": [np.array([4.0, 6.0]), np.array([4.0])],
        "ES": [np.array([5.0]), np.array([7.0])],
    }
    monkeypatch.setattr(
        features,
        "_thickness_per_slice",
        lambda mask: given["ED" if np.array_equal(mask, ed) else "ES"],
    )
    f = patient_features(ed, es, "p")
    diameter = 2 * np.sqrt(100 / np.pi)  # the largest LV ED cross-section: 100 pixels
    mean_ed = 14 / 3  # (4 + 6 + 4) / 3
    expected = {
        "lv_ef": (150 - 70) / 150,
        "rv_ef": (50 - 25) / 50,
        "rv_lv_ed": 50 / 150,
        "rv_lv_es": 25 / 70,
        "myo_lv_ed": 43 / 150,
        "myo_lv_es": 50 / 70,
        "myo_es_ed": 50 / 43,
        "rv_es_lv_ed": 25 / 150,
        "wall_max_ed": 6 / diameter,
        "wall_mean_ed": mean_ed / diameter,
        "wall_cv_ed": (1 / 5 + 0) / 2,  # slice 0: std 1 / mean 5; slice 1: one value
        "wall_max_es": 7 / diameter,
        "wall_thickening": 6 / mean_ed,  # ES mean (5 + 7) / 2 over ED mean
        "lv_slice_ef_std": np.std([60 / 100, 20 / 50]),  # per-slice LV area change
    }
    assert set(expected) == set(FEATURES)
    for name, value in expected.items():
        assert f[name] == pytest.approx(value, rel=1e-12), name
    ml = 1.5 * 1.5 * 10 / 1000
    absolute = absolute_features(ed, es, (1.5, 1.5, 10.0))
    assert absolute == pytest.approx({
        "lv_edv_ml": 150 * ml, "lv_esv_ml": 70 * ml, "rv_edv_ml": 50 * ml,
        "rv_esv_ml": 25 * ml, "myo_mass_g": 43 * ml * 1.05, "wall_max_ed_mm": 6 * 1.5,
    })  # fmt: skip


def test_thickness_of_a_one_pixel_wall_is_two_pixels() -> None:
    """A one-pixel-wide myocardium is its own skeleton, one pixel from the background on
    both sides: thickness 2 at every pixel; a slice with fewer than 3 pixels is skipped."""
    from monai_forget.acdc.features import _thickness_per_slice

    mask = _blocks([[(2, 10, 5, 1, 12)], [(2, 3, 3, 1, 2)], [(2, 20, 8, 9, 1)]])
    per_slice = _thickness_per_slice(mask)
    assert len(per_slice) == 2
    for thickness, pixels in zip(per_slice, (12, 9), strict=True):
        np.testing.assert_array_equal(thickness, np.full(pixels, 2.0))


def test_features_refuse_a_missing_structure() -> None:
    es = heart()
    es[es == 1] = 0
    with pytest.raises(ValueError, match=r"patient042 ES: the mask has no RV"):
        patient_features(heart(), es, "patient042")
    with pytest.raises(ValueError, match="differ in shape"):
        patient_features(heart(), heart(depth=5), "p")


# --------------------------------------------------------------------------------------
# Classifier
# --------------------------------------------------------------------------------------


def test_classifier_matches_scikit_learn_and_round_trips(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(5), 12)
    x = rng.normal(size=(60, len(FEATURES))) + labels[:, None] * np.linspace(0, 1, len(FEATURES))
    clf = DiagnosisClassifier().fit(x, labels)
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=10000))
    reference.fit(x, labels)
    np.testing.assert_allclose(clf.predict_proba(x), reference.predict_proba(x), atol=1e-8)
    assert np.mean(clf.predict(x) == labels) > 0.8
    path = clf.save(tmp_path / "diagnosis.json")
    with pytest.raises(FileExistsError):
        clf.save(path)
    loaded = DiagnosisClassifier.load(path)
    np.testing.assert_allclose(loaded.predict_proba(x), clf.predict_proba(x))
    assert loaded.class_names == ("NOR", "MINF", "DCM", "HCM", "RV")
    data = json.loads(path.read_text())
    with pytest.raises(ValueError, match="unsupported version"):
        DiagnosisClassifier.from_dict({**data, "version": 99})
    with pytest.raises(ValueError, match="missing \\['RV'\\]"):
        DiagnosisClassifier().fit(x[labels < 4], labels[labels < 4])
    with pytest.raises(FileNotFoundError, match=r"diagnosis_train\.json"):
        DiagnosisClassifier.load(tmp_path / "none.json")

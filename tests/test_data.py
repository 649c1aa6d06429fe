"""Tests of monai_forget.data: the container, loaders, real data sets, overlap check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from pydicom_files import write_dicom

from monai_forget.data import (
    ACDC_GROUPS,
    DataOverlapError,
    LabelledImages,
    check_disjoint,
    concat,
    data_root,
    load_acdc_slices,
    load_digits,
    load_images,
    load_mnist_test,
    load_pneumoniamnist,
)


def _toy(n: int = 12, k: int = 3, seed: int = 0) -> LabelledImages:
    rng = np.random.default_rng(seed)
    images = rng.random((n, 1, 4, 4)).astype(np.float32)
    return LabelledImages(images, np.arange(n) % k, tuple(f"s{i}" for i in range(n)))


# ---------------------------------------------------------------- container


def test_inputs_are_never_modified_or_aliased() -> None:
    images = np.zeros((3, 1, 2, 2), dtype=np.float32)
    labels = np.array([0, 1, 1])
    data = LabelledImages(images, labels)
    images[0] = 5.0
    labels[0] = 1
    assert data.images[0].max() == 0.0 and data.labels[0] == 0
    assert not np.shares_memory(data.images, images)
    with pytest.raises(ValueError):
        data.images[0, 0, 0, 0] = 1.0  # stored copy is read-only
    item = data.to_dataset()[1]
    item["image"] += 1.0
    assert data.images[1].max() == 0.0


def test_coercion_and_defaults() -> None:
    data = LabelledImages(np.ones((4, 1, 2, 2), dtype=np.float64), np.array([[0], [2], [1], [2]]))
    assert data.images.dtype == np.float32 and data.labels.dtype == np.int64
    assert data.labels.shape == (4,) and data.num_classes == 3 and data.ids is None
    assert len(data) == 4


@pytest.mark.parametrize(
    ("images", "labels", "match"),
    [
        (np.zeros((2, 4, 4)), [0, 1], "channel axis"),
        (np.zeros((2, 1, 4, 4)), [0], "different lengths"),
        (np.full((2, 1, 4, 4), np.nan), [0, 1], "NaN or inf"),
        (np.zeros((2, 1, 4, 4)), [0, -1], "non-negative"),
        (np.zeros((2, 1, 4, 4)), [0.5, 1], "whole numbers"),
    ],
)
def test_bad_inputs_are_refused(images, labels, match) -> None:
    with pytest.raises(ValueError, match=match):
        LabelledImages(images, np.asarray(labels))


def test_label_outside_num_classes_and_bad_ids() -> None:
    with pytest.raises(ValueError, match="class range"):
        LabelledImages(np.zeros((2, 1, 2, 2)), np.array([0, 3]), num_classes=2)
    with pytest.raises(ValueError, match="one id per"):
        LabelledImages(np.zeros((2, 1, 2, 2)), np.array([0, 1]), ids=("a",))


def test_subset_concat_split() -> None:
    data = _toy(30, 3)
    sub = data.subset([4, 1])
    assert sub.ids == ("s4", "s1") and np.array_equal(sub.images[0], data.images[4])
    assert sub.num_classes == 3
    mask = data.labels == 0
    assert len(data.subset(mask)) == mask.sum()
    both = concat(sub, data.subset([7]))
    assert both.ids == ("s4", "s1", "s7") and len(both) == 3
    assert len(sub.concat(data)) == 32

    a, b = data.split(0.4, seed=3)
    assert len(a) == 12 and len(b) == 18
    assert set(a.ids).isdisjoint(b.ids) and set(a.ids) | set(b.ids) == set(data.ids)
    assert np.bincount(a.labels).tolist() == [4, 4, 4]  # stratified
    a2, _ = data.split(0.4, seed=3)
    a3, _ = data.split(0.4, seed=4)
    assert a.ids == a2.ids and a.ids != a3.ids
    with pytest.raises(ValueError):
        data.split(1.0, seed=0)


def test_to_dataset_feeds_monai_prepare_batch() -> None:
    from monai.engines.utils import default_prepare_batch
    from torch.utils.data import DataLoader

    data = _toy(5)
    batch = next(iter(DataLoader(data.to_dataset(), batch_size=5)))
    images, labels = default_prepare_batch(batch)
    assert images.shape == (5, 1, 4, 4) and images.dtype == torch.float32
    assert labels.dtype == torch.int64 and labels.tolist() == data.labels.tolist()


# ---------------------------------------------------------------- loaders


def _write_png_folder(root: Path) -> np.ndarray:
    from PIL import Image

    rng = np.random.default_rng(1)
    pix = rng.integers(0, 256, size=(4, 5, 6), dtype=np.uint8)
    for i, cls in enumerate(["b_normal", "a_sick", "b_normal", "a_sick"]):
        (root / cls).mkdir(parents=True, exist_ok=True)
        Image.fromarray(pix[i]).save(root / cls / f"img{i}.png")
    (root / "a_sick" / "notes.txt").write_text("ignored")
    return pix


def test_load_png_folder(tmp_path: Path) -> None:
    pix = _write_png_folder(tmp_path)
    data = load_images(tmp_path)
    assert data.images.shape == (4, 1, 5, 6) and data.num_classes == 2
    assert data.ids == (
        "a_sick/img1.png",
        "a_sick/img3.png",
        "b_normal/img0.png",
        "b_normal/img2.png",
    )
    assert data.labels.tolist() == [0, 0, 1, 1]  # sorted folder names
    np.testing.assert_allclose(data.images[0, 0], pix[1] / 255.0, atol=1e-7)


def test_folder_with_mixed_shapes_suggests_resizing(tmp_path: Path) -> None:
    from PIL import Image

    for cls, shape in (("a", (4, 4)), ("b", (5, 4))):
        (tmp_path / cls).mkdir()
        Image.fromarray(np.zeros(shape, dtype=np.uint8)).save(tmp_path / cls / "x.png")
    with pytest.raises(ValueError, match="resize"):
        load_images(tmp_path)


def test_load_dicom_folder(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    pix = rng.integers(0, 4000, size=(3, 6, 5), dtype=np.uint16)
    for i, cls in enumerate(["x", "y", "y"]):
        (tmp_path / cls).mkdir(exist_ok=True)
        write_dicom(tmp_path / cls / f"{i}.dcm", f"p{i}", pixels=pix[i])
    data = load_images(tmp_path)
    assert data.images.shape == (3, 1, 6, 5) and data.labels.tolist() == [0, 1, 1]
    np.testing.assert_array_equal(data.images[:, 0], pix.astype(np.float32))


def test_load_npz_both_layouts(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    imgs = rng.integers(0, 256, (6, 7, 7), dtype=np.uint8)
    np.savez(tmp_path / "plain.npz", images=imgs, labels=np.array([0, 1, 0, 1, 2, 2]))
    plain = load_images(tmp_path / "plain.npz")
    assert plain.images.shape == (6, 1, 7, 7) and plain.num_classes == 3
    np.testing.assert_allclose(plain.images[:, 0], imgs / 255.0, atol=1e-7)

    np.savez(
        tmp_path / "med.npz",
        train_images=imgs,
        train_labels=np.arange(6)[:, None] % 2,
        test_images=imgs[:2],
        test_labels=np.array([[1], [0]]),
    )
    with pytest.raises(ValueError, match=r"split.*\['test', 'train'\]"):
        load_images(tmp_path / "med.npz")
    test = load_images(tmp_path / "med.npz", split="test")
    assert len(test) == 2 and test.labels.tolist() == [1, 0]
    with pytest.raises(ValueError, match="keys"):
        load_images(tmp_path / "med.npz", split="val")

    rgb = rng.integers(0, 256, (2, 7, 7, 3), dtype=np.uint8)
    np.savez(tmp_path / "rgb.npz", images=rgb, labels=np.array([0, 1]))
    assert load_images(tmp_path / "rgb.npz").images.shape == (2, 3, 7, 7)


def test_load_datalist_json(tmp_path: Path) -> None:
    pix = _write_png_folder(tmp_path / "imgs")
    entries = [
        {"image": "imgs/b_normal/img0.png", "label": 1},
        {"image": "imgs/a_sick/img1.png", "label": 0},
    ]
    (tmp_path / "list.json").write_text(
        json.dumps({"training": entries, "validation": entries[:1]})
    )
    data = load_images(tmp_path / "list.json")
    assert data.images.shape == (2, 1, 5, 6) and data.labels.tolist() == [1, 0]
    # Same orientation and scaling as the folder loader (rows stay rows).
    np.testing.assert_allclose(data.images[0, 0], pix[0] / 255.0, atol=1e-7)
    assert len(load_images(tmp_path / "list.json", section="validation")) == 1


def test_load_images_missing_and_unknown(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_images(tmp_path / "nope")
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(ValueError, match="folder"):
        load_images(tmp_path / "x.csv")


def test_load_digits() -> None:
    data = load_digits()
    assert data.images.shape == (1797, 1, 8, 8) and data.num_classes == 10
    assert data.images.min() == 0.0 and data.images.max() == 1.0


def test_missing_real_data_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="MONAI_FORGET_DATA"):
        load_pneumoniamnist(root=tmp_path)
    with pytest.raises(FileNotFoundError, match="MONAI_FORGET_DATA"):
        load_mnist_test(root=tmp_path)


def test_data_root_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MONAI_FORGET_DATA", str(tmp_path))
    assert data_root() == tmp_path
    monkeypatch.delenv("MONAI_FORGET_DATA")
    assert data_root().parts[-2:] == ("shared", "data")


# ---------------------------------------------------------------- real data


def test_pneumoniamnist(shared_data: Path) -> None:
    train = load_pneumoniamnist("train", root=shared_data)
    assert train.images.shape == (4708, 1, 28, 28)
    assert np.bincount(train.labels).tolist() == [1214, 3494]
    assert train.images.min() >= 0.0 and train.images.max() <= 1.0
    assert len(load_pneumoniamnist("test", root=shared_data)) == 624


def test_mnist_test(shared_data: Path) -> None:
    data = load_mnist_test(root=shared_data)
    assert data.images.shape == (10000, 1, 28, 28)
    assert sorted(set(data.labels.tolist())) == list(range(10))
    assert data.labels[:3].tolist() == [7, 2, 1]  # the well-known first test digits


def test_acdc_slices(shared_data: Path) -> None:
    data = load_acdc_slices(root=shared_data, size=32)
    assert data.images.shape == (1312, 1, 32, 32) and data.num_classes == 5
    assert len({i.split("_")[0] for i in data.ids}) == 70
    assert data.ids[0].startswith("patient") and "_frame" in data.ids[0]
    assert set(data.labels.tolist()) <= set(range(5))
    pid = {i: int(i[7:10]) for i in data.ids}
    # ACDC numbers its patients by group, 20 each: 001-020 DCM, 021-040 HCM, 041-060 MINF,
    # 061-080 NOR, 081-100 RV; labels follow the package's one order, normal first.
    numbering = {0: "DCM", 1: "HCM", 2: "MINF", 3: "NOR", 4: "RV"}
    for i, y in zip(data.ids, data.labels, strict=True):
        assert y == ACDC_GROUPS.index(numbering[(pid[i] - 1) // 20])
    assert ACDC_GROUPS[0] == "NOR"


def test_acdc_resize_matches_an_independent_computation(tmp_path: Path) -> None:
    """The slice resize is a mirrored Gaussian pre-filter (sigma = (factor - 1) / 2) then
    bilinear sampling at pixel centres; a constant slice stays constant (MONAI's
    ``Resize(anti_aliasing=True)`` pads with zeros and darkens the border)."""
    import h5py
    from scipy.ndimage import gaussian_filter

    folder = tmp_path / "acdc_ssl4mis" / "data"
    folder.mkdir(parents=True)
    (tmp_path / "acdc_ssl4mis" / "groups.csv").write_text("patient,group\npatient001,DCM\n")
    rng = np.random.default_rng(0)
    slices = {1: rng.random((96, 72), dtype=np.float32), 2: np.full((96, 72), 0.7, np.float32)}
    for index, image in slices.items():
        with h5py.File(folder / f"patient001_frame01_slice_{index}.h5", "w") as h5:
            h5["image"] = image
    data = load_acdc_slices(root=tmp_path, size=24)

    sigma = ((96 / 24 - 1) / 2, (72 / 24 - 1) / 2)
    smooth = torch.from_numpy(gaussian_filter(slices[1].astype(np.float64), sigma, mode="mirror"))
    expected = torch.nn.functional.interpolate(
        smooth[None, None], size=(24, 24), mode="bilinear", align_corners=False
    )[0, 0].numpy()
    np.testing.assert_allclose(data.images[0, 0], expected, atol=1e-5)
    np.testing.assert_allclose(data.images[1, 0], 0.7, atol=1e-6)
    assert data.ids == ("patient001_frame01_slice_1", "patient001_frame01_slice_2")


# ---------------------------------------------------------------- overlap check


def test_check_disjoint_finds_planted_duplicate() -> None:
    data = _toy(20)
    query, calib = data.subset(range(10)), data.subset(range(10, 20))
    check_disjoint(query, calib)  # disjoint: no error

    planted = concat(calib, query.subset([6]))
    with pytest.raises(DataOverlapError, match=r"1 of 10 .*D_Q\[6\] \(s6\).*remove these samples"):
        check_disjoint(query, planted)


def test_check_disjoint_ignores_near_duplicates() -> None:
    query = _toy(5)
    near = query.images.copy()
    near[:, 0, 1, 2] += 1e-3  # one pixel differs in every image
    check_disjoint(query, LabelledImages(near, query.labels))


def test_load_nifti_and_rgb_folder(tmp_path: Path) -> None:
    import nibabel as nib
    from PIL import Image

    rng = np.random.default_rng(4)
    pix = rng.integers(0, 256, (2, 4, 3), dtype=np.uint8)
    (tmp_path / "nii" / "c0").mkdir(parents=True)
    for i in range(2):
        nib.save(nib.Nifti1Image(pix[i], np.eye(4)), tmp_path / "nii" / "c0" / f"{i}.nii.gz")
    data = load_images(tmp_path / "nii")
    assert data.images.shape == (2, 1, 4, 3)
    np.testing.assert_allclose(data.images[:, 0], pix / 255.0, atol=1e-7)

    rgb = rng.integers(0, 256, (5, 6, 3), dtype=np.uint8)
    (tmp_path / "rgb" / "c0").mkdir(parents=True)
    Image.fromarray(rgb).save(tmp_path / "rgb" / "c0" / "a.png")
    data = load_images(tmp_path / "rgb")
    assert data.images.shape == (1, 3, 5, 6)
    np.testing.assert_allclose(data.images[0, 1], rgb[..., 1] / 255.0, atol=1e-7)


def test_empty_set_is_representable() -> None:
    empty = _toy(6).subset([])
    assert len(empty) == 0 and empty.images.shape == (0, 1, 4, 4)
    check_disjoint(empty, _toy(6))


# ---------------------------------------------------------------- one reader path


def _datalist(root: Path, files: list[Path]) -> Path:
    entries = [{"image": str(f), "label": 0} for f in files]
    (root / "list.json").write_text(json.dumps({"training": entries}))
    return root / "list.json"


def test_dicom_keeps_stored_values_in_folder_and_datalist(tmp_path: Path) -> None:
    import shutil

    import pydicom
    from pydicom.data import get_testdata_file

    source = get_testdata_file("CT_small.dcm")  # bundled with pydicom; RescaleIntercept -1024
    ds = pydicom.dcmread(source)
    assert float(ds.RescaleIntercept) != 0.0  # the rescale that must not be applied
    (tmp_path / "ct").mkdir()
    shutil.copy(source, tmp_path / "ct" / "a.dcm")
    folder = load_images(tmp_path)
    np.testing.assert_array_equal(folder.images[0, 0], ds.pixel_array.astype(np.float32))
    listed = load_images(_datalist(tmp_path, [tmp_path / "ct" / "a.dcm"]))
    np.testing.assert_array_equal(listed.images, folder.images)


def test_16bit_png_keeps_its_values(tmp_path: Path) -> None:
    from PIL import Image

    pix = np.random.default_rng(5).integers(0, 65536, (5, 6), dtype=np.uint16)
    (tmp_path / "c").mkdir()
    Image.fromarray(pix).save(tmp_path / "c" / "a.png")
    data = load_images(tmp_path)
    np.testing.assert_array_equal(data.images[0, 0], pix.astype(np.float32))  # not /255


def test_multiframe_dicom_and_3d_nifti_are_refused_by_name(tmp_path: Path) -> None:
    import nibabel as nib

    (tmp_path / "dcm" / "c").mkdir(parents=True)
    frames = np.zeros((3, 6, 5), dtype=np.uint16)
    write_dicom(tmp_path / "dcm" / "c" / "cine.dcm", "p", pixels=frames)
    (tmp_path / "nii" / "c").mkdir(parents=True)
    # (H, W, 3): a volume of three slices, not an RGB image
    volume = nib.Nifti1Image(np.zeros((4, 3, 3), dtype=np.int16), np.eye(4))
    nib.save(volume, tmp_path / "nii" / "c" / "vol.nii.gz")
    for path, match in (
        (tmp_path / "dcm", r"cine\.dcm is a multi-frame DICOM \(3 frames\)"),
        (tmp_path / "nii", r"vol\.nii\.gz holds a 3D volume"),
    ):
        with pytest.raises(ValueError, match=match):
            load_images(path)
        with pytest.raises(ValueError, match=match):
            load_images(_datalist(tmp_path, sorted(path.rglob("*.*"))))


def test_unreadable_image_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x.png").write_text("not an image")
    with pytest.raises(ValueError, match=r"x\.png cannot be read as a PNG/JPEG file"):
        load_images(tmp_path)

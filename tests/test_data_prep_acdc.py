"""ACDC layouts: the original NIfTI release (generated fixture) and the SSL4MIS h5 release."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from pathlib import Path

import h5py
import nibabel as nib
import numpy as np
import pytest
from monai.data import load_decathlon_datalist

from monai_forget.cli import prepare
from monai_forget.data.acdc import ACDC_GROUPS
from monai_forget.data_prep import acdc_h5, acdc_nifti
from monai_forget.data_prep.acdc import read_info

SHAPE = (6, 5, 3)  # X, Y, Z (3 short-axis slices)
N_FRAMES = 4
GROUP_OF = {1: "DCM", 2: "NOR", 3: "RV", 4: "DCM"}


def tree_digest(root: Path) -> dict[str, str]:
    """Content hash of every file under ``root`` (catches edits, additions, deletions)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def write_nifti(path: Path, array: np.ndarray) -> None:
    nib.save(nib.Nifti1Image(array, np.eye(4)), path)


def make_acdc(root: Path, patients: dict[int, str] = GROUP_OF) -> Path:
    """A format-identical miniature of the ACDC training release."""
    rng = np.random.default_rng(0)
    for number, group in patients.items():
        patient = f"patient{number:03d}"
        folder = root / "training" / patient
        folder.mkdir(parents=True)
        (folder / "Info.cfg").write_text(
            f"ED: 1\nES: 3\nGroup: {group}\nHeight: 180.0\nNbFrame: {N_FRAMES}\nWeight: 80.0\n"
        )
        cine = rng.integers(0, 255, (*SHAPE, N_FRAMES)).astype(np.int16)
        write_nifti(folder / f"{patient}_4d.nii.gz", cine)
        for frame in (1, 3):
            write_nifti(folder / f"{patient}_frame{frame:02d}.nii.gz", cine[..., frame - 1])
            write_nifti(
                folder / f"{patient}_frame{frame:02d}_gt.nii.gz",
                rng.integers(0, 4, SHAPE).astype(np.uint8),
            )
    return root


def run(argv: list[str]) -> int:
    """Parse ``prepare ...`` with the real sub-command parser and call its handler."""
    parser = argparse.ArgumentParser()
    prepare.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["prepare", *argv])
    return args.func(args)


# --- original NIfTI release -----------------------------------------------------------


def test_nifti_ed_es_slices(tmp_path):
    root = make_acdc(tmp_path / "acdc")
    samples = acdc_nifti.collect(root, frames="ed-es", level="slice")
    assert len(samples) == len(GROUP_OF) * 2 * SHAPE[2]
    first = samples[0]
    assert first["image"] == root / "training/patient001/patient001_frame01.nii.gz"
    assert first["seg"] == root / "training/patient001/patient001_frame01_gt.nii.gz"
    assert (first["patient"], first["group"], first["label"]) == ("patient001", "DCM", 2)
    assert (first["frame"], first["phase"], first["slice"], first["slice_axis"]) == (1, "ED", 0, 2)
    assert Counter(s["phase"] for s in samples) == {"ED": 12, "ES": 12}
    assert {s["label"] for s in samples if s["group"] == "NOR"} == {0}
    assert "frame_index" not in first


def test_nifti_all_frames_reference_the_4d_file(tmp_path):
    root = make_acdc(tmp_path / "acdc")
    samples = acdc_nifti.collect(root / "training", frames="all", level="slice")
    assert len(samples) == len(GROUP_OF) * N_FRAMES * SHAPE[2]
    one = [s for s in samples if s["patient"] == "patient002"]
    assert {s["image"].name for s in one} == {"patient002_4d.nii.gz"}
    by_frame = {s["frame"]: s for s in one if s["slice"] == 1}
    assert [by_frame[f]["frame_index"] for f in (1, 2, 3, 4)] == [0, 1, 2, 3]
    assert [by_frame[f]["phase"] for f in (1, 2, 3, 4)] == ["ED", None, "ES", None]
    assert by_frame[3]["seg"].name == "patient002_frame03_gt.nii.gz"
    assert by_frame[2]["seg"] is None
    # the referenced 4D voxel is the ED frame's voxel: frame_index selects the time point
    cine = nib.load(by_frame[3]["image"]).get_fdata()
    es = nib.load(root / "training/patient002/patient002_frame03.nii.gz").get_fdata()
    np.testing.assert_array_equal(cine[..., by_frame[3]["frame_index"]], es)


def test_nifti_volume_level(tmp_path):
    root = make_acdc(tmp_path / "acdc")
    samples = acdc_nifti.collect(root, frames="ed-es", level="volume")
    assert len(samples) == len(GROUP_OF) * 2
    assert "slice" not in samples[0]


def test_nifti_cli_with_site_map_leaves_sources_untouched(tmp_path):
    root = make_acdc(tmp_path / "acdc")
    site_map = tmp_path / "sites.csv"
    site_map.write_text(
        "patient,site\npatient001,1.5T\npatient002,1.5T\npatient003,3T\npatient004,3T\n"
    )
    before = tree_digest(root)
    output = tmp_path / "out" / "acdc.json"
    code = run(
        ["acdc-nifti", str(root), "-o", str(output), "--site-map", str(site_map),
         "--split", "0.5,0,0.5", "--seed", "1"]
    )  # fmt: skip
    assert code == 0
    assert tree_digest(root) == before  # nothing modified, added or removed
    datalist = json.loads(output.read_text())
    assert datalist["provenance"]["site_assignment"] == "site-map"
    assert datalist["labels"]["0"] == "NOR"
    split_patients = {k: {e["patient"] for e in datalist[k]} for k in ("training", "test")}
    assert not split_patients["training"] & split_patients["test"]
    assert len(split_patients["training"] | split_patients["test"]) == 4
    sites = {e["patient"]: e["site"] for k in ("training", "test") for e in datalist[k]}
    assert sites == {"patient001": "1.5T", "patient002": "1.5T", "patient003": "3T",
                     "patient004": "3T"}  # fmt: skip
    loaded = load_decathlon_datalist(output, data_list_key="training")
    assert all(Path(e["image"]).is_file() and Path(e["seg"]).is_file() for e in loaded)
    with pytest.raises(FileExistsError, match="--overwrite"):
        run(["acdc-nifti", str(root), "-o", str(output)])
    assert run(["acdc-nifti", str(root), "-o", str(output), "--overwrite"]) == 0


def test_nifti_cli_unknown_site_map_patient(tmp_path):
    root = make_acdc(tmp_path / "acdc")
    site_map = tmp_path / "sites.csv"
    site_map.write_text("patient,site\npatient001,1.5T\npatient002,1.5T\npatient003,3T\n"
                        "patient004,3T\npatient999,3T\n")  # fmt: skip
    with pytest.raises(ValueError, match=r"not in the data: .*sites\.csv line 6;") as caught:
        run(["acdc-nifti", str(root), "-o", str(tmp_path / "d.json"), "--site-map", str(site_map)])
    assert "patient999" not in str(caught.value)
    with pytest.raises(ValueError, match=r"in no provider: patient003, patient004"):
        run(["acdc-nifti", str(root), "-o", str(tmp_path / "d.json"),
             "--provider", "A=patient001,patient002"])  # fmt: skip
    assert not (tmp_path / "d.json").exists()


def test_info_cfg_errors_name_file_field_and_line(tmp_path):
    info = tmp_path / "Info.cfg"
    info.write_text("ED: 1\nES: 3\nHeight: 180\nNbFrame: 4\nWeight: 80\n")
    with pytest.raises(ValueError, match=r"Info.cfg: missing field\(s\) \['Group'\]"):
        read_info(info)
    info.write_text("ED: 1\nES 3\nGroup: NOR\n")
    with pytest.raises(ValueError, match=r"Info.cfg, line 2: expected 'Key: value'"):
        read_info(info)
    info.write_text("ED: 1\nES: 9\nGroup: NOR\nHeight: 1\nNbFrame: 4\nWeight: 1\n")
    with pytest.raises(ValueError, match=r"ES must be an integer in \[1, 4\], got 9: a frame"):
        read_info(info)
    info.write_text("ED: one\nES: 2\nGroup: NOR\nHeight: 1\nNbFrame: 4\nWeight: 1\n")
    with pytest.raises(ValueError, match="field ED is not a number") as caught:
        read_info(info)
    assert "one" not in str(caught.value)  # a clinical value is never repeated
    info.write_text("ED: 1.5\nES: 2\nGroup: NOR\nHeight: 1\nNbFrame: 4\nWeight: 1\n")
    with pytest.raises(ValueError, match=r"field ED is not a whole number") as caught:
        read_info(info)
    assert "1.5" not in str(caught.value)
    info.write_text("ED: 1\nES: 2\nGroup: XYZ\nHeight: 1\nNbFrame: 4\nWeight: 1\n")
    with pytest.raises(ValueError, match="unknown pathology group 'XYZ'"):
        read_info(info)
    with pytest.raises(FileNotFoundError, match=r"needs an Info\.cfg"):
        read_info(tmp_path / "absent" / "Info.cfg")


def test_nifti_wrong_dimensionality_and_frame_count(tmp_path):
    root = make_acdc(tmp_path / "acdc", {1: "NOR"})
    folder = root / "training" / "patient001"
    write_nifti(folder / "patient001_frame01.nii.gz", np.zeros((*SHAPE, 2), np.int16))
    with pytest.raises(ValueError, match=r"patient001_frame01.nii.gz: .* must be a 3D volume"):
        acdc_nifti.collect(root)
    write_nifti(folder / "patient001_4d.nii.gz", np.zeros((*SHAPE, 5), np.int16))
    with pytest.raises(ValueError, match=r"5 frames but .*Info.cfg says NbFrame = 4"):
        acdc_nifti.collect(root, frames="all")
    write_nifti(folder / "patient001_4d.nii.gz", np.zeros((*SHAPE, N_FRAMES), np.int16))
    (folder / "patient001_frame03_gt.nii.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"patient001_frame03_gt\.nii\.gz not found"):
        acdc_nifti.collect(root, frames="all")
    with pytest.raises(FileNotFoundError, match="no patientNNN folders"):
        acdc_nifti.collect(tmp_path)


# --- SSL4MIS h5 release: fixture ------------------------------------------------------


def make_h5_release(root: Path) -> Path:
    data = root / "data"
    data.mkdir(parents=True)
    (root / "groups.csv").write_text("patient,group\npatient001,DCM\npatient002,NOR\n")
    rng = np.random.default_rng(0)
    for frame in (1, 2):
        for s in (1, 2):
            with h5py.File(data / f"patient001_frame{frame:02d}_slice_{s}.h5", "w") as f:
                f["image"] = rng.random((4, 3), np.float32)
                f["label"] = np.zeros((4, 3), np.uint8)
        with h5py.File(data / f"patient002_frame{frame:02d}.h5", "w") as f:
            f["image"] = rng.random((3, 4, 3), np.float32)
            f["label"] = np.zeros((3, 4, 3), np.uint8)
    return root


def test_h5_fixture_slices_and_volumes(tmp_path):
    root = make_h5_release(tmp_path / "h5")
    samples, skipped = acdc_h5.collect(root)
    assert skipped == 0 and len(samples) == 4 + 2 * 3
    two_d = [s for s in samples if s["slice_axis"] is None]
    assert sorted(s["slice"] for s in two_d) == [0, 0, 1, 1]  # file names count from 1
    volume = [s for s in samples if s["patient"] == "patient002" and s["frame"] == 2]
    assert [(s["slice"], s["slice_axis"], s["phase"]) for s in volume] == [
        (0, 0, "ES"), (1, 0, "ES"), (2, 0, "ES")
    ]  # fmt: skip
    assert {s["label"] for s in volume} == {0}  # NOR
    samples, skipped = acdc_h5.collect(root, level="volume")
    assert (len(samples), skipped) == (2, 4)


def test_h5_errors(tmp_path):
    root = make_h5_release(tmp_path / "h5")
    (root / "groups.csv").write_text("patient,group\npatient001,DCM\npatient002,FOO\n")
    with pytest.raises(ValueError, match=r"groups.csv, line 3: unknown pathology group 'FOO'"):
        acdc_h5.collect(root)
    (root / "groups.csv").write_text("patient,group\npatient001,DCM\n")
    with pytest.raises(ValueError, match=r"patient002 has no row in .*groups.csv"):
        acdc_h5.collect(root)
    (root / "groups.csv").write_text("patient,group\npatient001,DCM\npatient002,NOR\n")
    with h5py.File(root / "data" / "patient002_frame01.h5", "a") as f:
        del f["label"]
    with pytest.raises(
        ValueError, match=r"patient002_frame01.h5: missing dataset\(s\) \['label'\]"
    ):
        acdc_h5.collect(root)


# --- SSL4MIS h5 release as DICOM files (--dicom-dir) ----------------------------------


def test_h5_dicom_export_writes_each_slice_as_a_series_file(tmp_path):
    import pydicom

    root = make_h5_release(tmp_path / "h5")
    out, dicoms = tmp_path / "acdc.json", tmp_path / "dicom"
    assert run(["acdc-h5", str(root), "-o", str(out), "--dicom-dir", str(dicoms)]) == 0
    files = sorted(p.relative_to(dicoms).as_posix() for p in dicoms.rglob("*.dcm"))
    assert len(files) == 4 + 2 * 3
    assert "patient001/frame02/slice_02.dcm" in files and "patient002/frame01/slice_03.dcm" in files
    with h5py.File(root / "data" / "patient002_frame01.h5", "r") as f:
        expected = np.rint(f["image"][2].astype(np.float64) * 4095)  # third slice, 1-based name
    ds = pydicom.dcmread(dicoms / "patient002" / "frame01" / "slice_03.dcm")
    np.testing.assert_array_equal(ds.pixel_array, expected)
    assert (ds.BitsStored, ds.Modality, ds.PatientID, ds.InstanceNumber) == (
        12,
        "MR",
        "patient002",
        3,
    )
    assert (float(ds.WindowCenter), float(ds.WindowWidth)) == (2048.0, 4096.0)  # 0..4095 shown
    uids: dict[Path, set[str]] = {}
    for file in dicoms.rglob("*.dcm"):
        uids.setdefault(file.parent, set()).add(pydicom.dcmread(file).SeriesInstanceUID)
    assert len({frozenset(v) for v in uids.values()}) == len(uids) == 4  # a series per folder
    assert all(len(series) == 1 for series in uids.values())  # every file of it in that series
    datalist = json.loads(out.read_text())
    entries = [e for k in ("training", "validation", "test") for e in datalist[k]]
    assert len(entries) == 10 and all((out.parent / e["image"]).is_file() for e in entries)
    entry = next(
        e for e in entries if (e["patient"], e["frame"], e["slice"]) == ("patient002", 1, 2)
    )
    assert entry["source_file"] == "patient002_frame01.h5"
    assert entry["image"].endswith("patient002/frame01/slice_03.dcm")
    assert "seg" not in entry and "slice_axis" not in entry


def test_h5_dicom_export_refusals_leave_nothing(tmp_path):
    from monai_forget.data_prep import acdc_dicom

    root = make_h5_release(tmp_path / "h5")
    out, dicoms = tmp_path / "acdc.json", tmp_path / "dicom"
    dicoms.mkdir()
    (dicoms / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match=r"not an empty folder.*another `dicom_dir`"):
        run(["acdc-h5", str(root), "-o", str(out), "--dicom-dir", str(dicoms)])
    assert not out.exists() and [p.name for p in dicoms.iterdir()] == ["keep.txt"]
    with pytest.raises(ValueError, match=r"\(`level` slice\)"):
        run(["acdc-h5", str(root), "-o", str(out), "--dicom-dir", str(tmp_path / "d2"),
             "--level", "volume"])  # fmt: skip
    volumes, _ = acdc_h5.collect(root, level="volume")
    with pytest.raises(ValueError, match="is a volume entry: the DICOM export writes one file"):
        acdc_dicom.dicom_samples(volumes, tmp_path / "d2")  # the library's rule, not the CLI's
    with pytest.raises(ValueError, match="inside the input release"):
        run(["acdc-h5", str(root), "-o", str(out), "--dicom-dir", str(root / "dicom")])
    with h5py.File(root / "data" / "patient001_frame02_slice_2.h5", "a") as f:
        f["image"][0, 0] = 1.5  # not the release's [0, 1] scaling
    samples, _ = acdc_h5.collect(root)
    with pytest.raises(ValueError, match=r"slice_2.h5 slice 1: values .*1.5 outside \[0, 1\]"):
        acdc_dicom.export_dicom(samples, tmp_path / "d3", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dicom", "h5"]  # staging removed


def test_grey_dicom_refuses_values_outside_the_stored_bits(tmp_path):
    import pydicom

    from monai_forget.dicom.secondary_capture import write_grey_dicom

    with pytest.raises(ValueError, match="do not fit 12 stored bits"):
        write_grey_dicom(tmp_path / "a.dcm", np.full((2, 2), 4096), patient="P", instance=1)
    with pytest.raises(ValueError, match="2-D image"):
        write_grey_dicom(tmp_path / "a.dcm", np.zeros((1, 2, 2)), patient="P", instance=1)
    assert not list(tmp_path.iterdir())
    write_grey_dicom(
        tmp_path / "b.dcm", np.full((2, 3), 255), patient="P", instance=1, bits_stored=8
    )
    ds = pydicom.dcmread(tmp_path / "b.dcm")
    assert ds.pixel_array.dtype == np.uint8 and ds.pixel_array.shape == (2, 3)


def test_a_secondary_capture_has_the_image_plane_monais_reader_wants(tmp_path):
    """Issue 67, item 6: MONAI's PydicomReader warns on a file without orientation and
    position; the writer gives each a nominal plane, so reading one warns of nothing."""
    import warnings

    from monai.data import PydicomReader
    from monai.transforms import LoadImage

    from monai_forget.dicom.secondary_capture import write_grey_dicom

    write_grey_dicom(tmp_path / "a.dcm", np.arange(12).reshape(3, 4), patient="P", instance=2,
                     spacing=(0.5, 2.0))  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        image = LoadImage(reader=PydicomReader(), image_only=True)(str(tmp_path / "a.dcm"))
    assert [str(w.message) for w in caught if "ImageOrientationPatient" in str(w.message)] == []
    assert tuple(image.shape[:2]) == (4, 3)  # columns first, as MONAI loads
    np.testing.assert_allclose(np.diag(image.affine)[:2], [-2.0, -0.5])  # LPS -> RAS


def test_h5_real_slice_reaches_the_cxr_bundle_as_its_display_values(shared_data, tmp_path):
    """A real ACDC slice exported as DICOM and read by the CXR bundle's loader: the h5
    image on the DICOM grid, columns first (MONAI's PydicomReader), scaled to 0..255 by the
    file's window (display_values: center +- width / 2)."""
    from monai_forget.data_prep import acdc_dicom
    from monai_forget.memorisation.pipeline import Preprocessing

    root = shared_data / "acdc_ssl4mis"
    if not (root / "data").is_dir():
        pytest.skip(f"{root} absent")
    samples, _ = acdc_h5.collect(root)
    chosen = [s for s in samples if s["patient"] == "patient004" and s["frame"] == 1][:2]
    acdc_dicom.export_dicom(chosen, tmp_path / "d", progress=False)
    file = acdc_dicom.dicom_path(tmp_path / "d", chosen[1])
    bundle = Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification"
    loaded = Preprocessing.from_bundle(bundle).load([file])[0]
    with h5py.File(chosen[1]["image"], "r") as f:
        image = f["image"][()].astype(np.float64)
    assert image.shape[0] != image.shape[1]  # a non-square grid shows the transpose
    expected = np.rint(image * 4095) / 4096 * 255
    np.testing.assert_allclose(loaded[0], expected.T, atol=1e-3)


# --- SSL4MIS h5 release: the real data ------------------------------------------------


def test_h5_real_release_counts_and_groups(shared_data, tmp_path):
    root = shared_data / "acdc_ssl4mis"
    if not (root / "data").is_dir():
        pytest.skip(f"{root} absent")
    samples, _ = acdc_h5.collect(root)
    two_d = [s for s in samples if s["slice_axis"] is None]
    three_d = [s for s in samples if s["slice_axis"] == 0]
    assert len(two_d) == 1312 and len({s["patient"] for s in two_d}) == 70
    assert len({s["image"] for s in three_d}) == 60 and len({s["patient"] for s in three_d}) == 30
    assert len(samples) == len((root / "all_slices.list").read_text().split())  # 1902
    patients = {s["patient"]: s["group"] for s in samples}
    assert len(patients) == 100 and Counter(patients.values()) == dict.fromkeys(ACDC_GROUPS, 20)
    assert patients["patient001"] == "DCM" and patients["patient100"] == "RV"

    output = tmp_path / "acdc.json"
    before = {p: p.stat().st_mtime_ns for p in (root / "groups.csv", root / "train.list")}
    assert run(["acdc-h5", str(root), "-o", str(output), "--random-sites", "2", "--seed", "5"]) == 0
    assert {p: p.stat().st_mtime_ns for p in before} == before
    datalist = json.loads(output.read_text())
    prov = datalist["provenance"]
    assert prov["site_assignment"] == "random-stratified (not field strength)"
    counts = prov["counts"]
    assert [counts[k]["patients"] for k in ("training", "validation", "test")] == [70, 10, 20]
    assert sum(counts[k]["entries"] for k in ("training", "validation", "test")) == 1902
    by_split = {k: {e["patient"] for e in datalist[k]} for k in ("training", "validation", "test")}
    assert not (
        by_split["training"] & by_split["test"] or by_split["training"] & by_split["validation"]
    )
    test_entries = load_decathlon_datalist(output, data_list_key="test")
    entry = next(e for e in test_entries if e["slice_axis"] == 0)
    with h5py.File(entry["image"], "r") as f:
        assert f["image"].ndim == 3 and 0 <= entry["slice"] < f["image"].shape[0]


def test_h5_real_release_split(shared_data, tmp_path):
    root = shared_data / "acdc_ssl4mis"
    if not (root / "train.list").is_file():
        pytest.skip(f"{root} absent")
    output = tmp_path / "acdc.json"
    assert run(["acdc-h5", str(root), "-o", str(output), "--split", "release", "--absolute"]) == 0
    datalist = json.loads(output.read_text())
    counts = datalist["provenance"]["counts"]
    assert [counts[k]["patients"] for k in ("training", "validation", "test")] == [70, 10, 20]
    assert counts["training"]["entries"] == 1312  # the release's train_slices.list
    assert datalist["provenance"]["split"] == "as given by the source layout"
    assert Path(datalist["test"][0]["image"]).is_absolute()


# --- reading referenced slices back ---------------------------------------------------


def test_read_array_follows_nifti_references(tmp_path):
    from monai_forget.data_prep.reading import LoadReferencedSliced, read_array

    root = make_acdc(tmp_path / "acdc", {1: "NOR"})
    folder = root / "training" / "patient001"
    es = nib.load(folder / "patient001_frame03.nii.gz").get_fdata()
    gt = nib.load(folder / "patient001_frame03_gt.nii.gz").get_fdata()
    cine = acdc_nifti.collect(root, frames="all")
    entry = next(s for s in cine if s["frame"] == 3 and s["slice"] == 2)
    np.testing.assert_array_equal(read_array(entry), es[:, :, 2])
    np.testing.assert_array_equal(read_array(entry, "seg"), gt[:, :, 2])
    loaded = LoadReferencedSliced(keys=("image", "seg"))(entry)
    assert loaded["image"].shape == (1, *SHAPE[:2]) and loaded["image"].dtype == np.float32
    assert loaded["patient"] == "patient001"
    volume = acdc_nifti.collect(root, level="volume")[0]
    assert read_array(volume).shape == SHAPE
    with pytest.raises(ValueError, match=r"index 7 outside 0\.\.2"):
        read_array(dict(entry, slice=7))


def test_read_array_real_h5(shared_data):
    from monai_forget.data_prep.reading import read_array

    data = shared_data / "acdc_ssl4mis" / "data"
    if not data.is_dir():
        pytest.skip(f"{data} absent")
    volume = data / "patient001_frame01.h5"
    entry = {"image": volume, "seg": volume, "slice": 4, "slice_axis": 0}
    with h5py.File(volume, "r") as f:
        np.testing.assert_array_equal(read_array(entry), f["image"][4])
        np.testing.assert_array_equal(read_array(entry, "seg"), f["label"][4])
    two_d = data / "patient003_frame01_slice_1.h5"
    assert read_array({"image": two_d, "slice": 0, "slice_axis": None}).ndim == 2

"""Chest X-ray layouts: MedMNIST npz (real data and fixture), Kermany, COVIDx, RSNA fixtures."""

from __future__ import annotations

import argparse
import hashlib
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pydicom
import pytest
from monai.data import load_decathlon_datalist
from PIL import Image
from pydicom_files import write_dicom

from monai_forget.cli import prepare
from monai_forget.data_prep import covidx, kermany, medmnist, rsna

SPLITS = ("training", "validation", "test")


def tree_digest(root: Path) -> dict[str, str]:
    """Content hash of every file under ``root`` (catches edits, additions, deletions)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run(argv: list[str]) -> int:
    """Parse ``prepare ...`` with the real sub-command parser and call its handler."""
    parser = argparse.ArgumentParser()
    prepare.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["prepare", *argv])
    return args.func(args)


def patients_by_split(datalist: dict) -> dict[str, set[str]]:
    return {k: {e["patient"] for e in datalist[k]} for k in SPLITS}


def disjoint(groups: dict[str, set[str]]) -> bool:
    values = list(groups.values())
    return all(not (a & b) for i, a in enumerate(values) for b in values[i + 1 :])


# --- MedMNIST -------------------------------------------------------------------------


def make_npz(path: Path, n: tuple[int, int, int] = (6, 2, 3)) -> Path:
    rng = np.random.default_rng(0)
    arrays = {}
    for split, size in zip(("train", "val", "test"), n, strict=True):
        arrays[f"{split}_images"] = rng.integers(0, 256, (size, 28, 28), dtype=np.uint8)
        arrays[f"{split}_labels"] = (np.arange(size) % 2).astype(np.uint8)[:, None]
    np.savez(path, **arrays)
    return path


def test_medmnist_fixture_exports_exact_pngs(tmp_path):
    npz = make_npz(tmp_path / "tiny.npz")
    digest = hashlib.sha256(npz.read_bytes()).hexdigest()
    output, images = tmp_path / "out" / "dl.json", tmp_path / "out" / "png"
    assert run(["medmnist", str(npz), "--image-dir", str(images), "-o", str(output)]) == 0
    assert hashlib.sha256(npz.read_bytes()).hexdigest() == digest
    datalist = json.loads(output.read_text())
    assert [len(datalist[k]) for k in SPLITS] == [6, 2, 3]
    entry = datalist["validation"][1]
    assert entry == {
        "image": "png/val_00001.png",
        "label": 1,
        "patient": "val_00001",
        "site": "all",
        "group": "pneumonia",
        "source_split": "val",
        "index": 1,
    }
    with np.load(npz) as data:
        np.testing.assert_array_equal(
            np.asarray(Image.open(images / "val_00001.png")), data["val_images"][1]
        )
    assert len(list(images.iterdir())) == 11
    # a second run must not silently replace either output
    with pytest.raises(FileExistsError):
        run(["medmnist", str(npz), "--image-dir", str(images), "-o", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()
    assert run(["medmnist", str(npz), "--image-dir", str(images), "-o", str(output),
                "--overwrite", "--split", "0.5,0.25,0.25"]) == 0  # fmt: skip
    assert disjoint(patients_by_split(json.loads(output.read_text())))


def test_medmnist_repeated_images_keep_the_held_out_copy(tmp_path, capsys):
    npz = make_npz(tmp_path / "tiny.npz")
    with np.load(npz) as data:
        arrays = dict(data)
    arrays["train_images"][4] = arrays["val_images"][1]  # a training image repeats val 1
    arrays["train_images"][5] = arrays["train_images"][2]  # and one repeats another
    np.savez(npz, **arrays)
    assert medmnist.repeated_images(npz) == {"train_00004": "val_00001",
                                             "train_00005": "train_00002"}  # fmt: skip
    output = tmp_path / "dl.json"
    assert run(["medmnist", str(npz), "--image-dir", str(tmp_path / "png"), "-o", str(output)]) == 0
    assert "left out 2 images that repeat another" in capsys.readouterr().out
    datalist = json.loads(output.read_text())
    assert {e["patient"] for e in datalist["training"]} == {f"train_0000{i}" for i in range(4)}
    assert [e["patient"] for e in datalist["validation"]] == ["val_00000", "val_00001"]
    assert datalist["provenance"]["repeats_left_out"] == {"train_00004": "val_00001",
                                                          "train_00005": "train_00002"}  # fmt: skip
    kept = tmp_path / "all.json"
    argv = ["medmnist", str(npz), "--image-dir", str(tmp_path / "png"), "-o", str(kept)]
    assert run([*argv, "--keep-repeats", "--overwrite"]) == 0
    assert len(json.loads(kept.read_text())["training"]) == 6


def test_medmnist_bad_files(tmp_path):
    bad = tmp_path / "multi.npz"
    np.savez(bad, train_images=np.zeros((2, 28, 28), np.uint8), train_labels=np.zeros((2, 14)))
    with pytest.raises(ValueError, match="only single-label"):
        medmnist.collect(bad, tmp_path / "png")
    np.savez(bad, train_images=np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(ValueError, match="has train_images but not its pair"):
        medmnist.collect(bad, tmp_path / "png")
    np.savez(bad, train_images=np.zeros((2, 28, 28), np.uint8), train_labels=np.array([[0], [2]]))
    with pytest.raises(ValueError, match="value 2 but only 2 label names"):
        medmnist.collect(bad, tmp_path / "png")
    # (two blank images: one is a repeat of the other unless repeats are kept)
    assert len(medmnist.collect(bad, tmp_path / "png", ("a", "b", "c"), keep_repeats=True)) == 2
    assert len(medmnist.collect(bad, tmp_path / "png", ("a", "b", "c"))) == 1


@pytest.fixture(scope="module")
def pneumonia_datalist(shared_data, tmp_path_factory):
    npz = shared_data / "medmnist" / "pneumoniamnist.npz"
    if not npz.is_file():
        pytest.skip(f"{npz} absent")
    out = tmp_path_factory.mktemp("pneumoniamnist")
    argv = ["medmnist", str(npz), "--image-dir", str(out / "png"), "-o", str(out / "dl.json")]
    assert run([*argv, "--random-sites", "5", "--seed", "2"]) == 0
    return npz, out / "dl.json"


@pytest.mark.slow
def test_medmnist_real_pneumoniamnist(pneumonia_datalist):
    npz, output = pneumonia_datalist
    datalist = json.loads(output.read_text())
    # 4708 / 524 / 624 images, less 29 repeats (26 train, 3 test copies; numpy's
    # np.unique over the test, val, train rows gives the same kept set).
    assert [len(datalist[k]) for k in SPLITS] == [4682, 524, 621]
    groups = {k: Counter(e["group"] for e in datalist[k]) for k in SPLITS}
    assert groups["training"] == {"normal": 1213, "pneumonia": 3469}
    assert groups["validation"] == {"normal": 135, "pneumonia": 389}
    assert groups["test"] == {"normal": 234, "pneumonia": 387}
    with np.load(npz) as data:
        rows = [data[f"{e['source_split']}_images"][e["index"]].tobytes()
                for k in SPLITS for e in datalist[k]]  # fmt: skip
    assert len(set(rows)) == len(rows)  # no image twice, in any split or provider
    assert len(datalist["provenance"]["repeats_left_out"]) == 29
    sites = Counter(e["site"] for k in SPLITS for e in datalist[k])
    assert len(sites) == 5 and max(sites.values()) - min(sites.values()) <= 1
    test = load_decathlon_datalist(output, data_list_key="test")
    with np.load(npz) as data:
        for entry in test[::150]:
            pixels = np.asarray(Image.open(entry["image"]))
            np.testing.assert_array_equal(pixels, data["test_images"][entry["index"]])
            assert entry["label"] == int(data["test_labels"][entry["index"], 0])


# --- Kermany --------------------------------------------------------------------------

KERMANY = {
    "train/NORMAL": ["IM-0115-0001.jpeg", "IM-0115-0002.jpeg", "NORMAL2-IM-1427-0001.jpeg"],
    "train/PNEUMONIA": ["person1_bacteria_1.jpeg", "person1_bacteria_2.jpeg",
                        "person2_virus_6.jpeg", "person3_bacteria_10.jpeg"],
    "val/NORMAL": ["NORMAL2-IM-1430-0001.jpeg"],
    "val/PNEUMONIA": ["person4_virus_1.jpeg"],
    "test/NORMAL": ["IM-0001-0001-0002.jpeg"],
    "test/PNEUMONIA": ["person5_bacteria_1.jpeg", "person6_virus_1.jpeg"],
}  # fmt: skip


def make_kermany(root: Path, layout: dict[str, list[str]] = KERMANY) -> Path:
    for folder, names in layout.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in names:
            Image.fromarray(np.full((8, 8), 100, np.uint8)).save(root / folder / name)
    (root / "train" / "NORMAL" / ".DS_Store").write_bytes(b"\0")
    return root


def test_kermany_patients_labels_and_source_split(tmp_path):
    root = make_kermany(tmp_path / "chest_xray")
    before = tree_digest(root)
    output = tmp_path / "dl.json"
    assert run(["kermany", str(root), "-o", str(output)]) == 0
    assert tree_digest(root) == before
    datalist = json.loads(output.read_text())
    assert [len(datalist[k]) for k in SPLITS] == [7, 2, 3]
    train = {Path(e["image"]).name: e for e in datalist["training"]}
    assert train["IM-0115-0002.jpeg"]["patient"] == "IM-0115"
    assert train["NORMAL2-IM-1427-0001.jpeg"]["patient"] == "NORMAL2-IM-1427"
    assert (train["person2_virus_6.jpeg"]["patient"], train["person2_virus_6.jpeg"]["subtype"]) == (
        "person2",
        "virus",
    )
    assert train["person1_bacteria_2.jpeg"]["label"] == 1
    assert datalist["test"][0]["patient"] == "IM-0001"
    assert "subtype" not in train["IM-0115-0001.jpeg"]
    assert train["IM-0115-0001.jpeg"]["label"] == 0
    assert datalist["provenance"]["patients_in_several_splits"] == {}
    assert Path(load_decathlon_datalist(output, data_list_key="test")[0]["image"]).is_file()


def test_kermany_resplit_keeps_patients_together(tmp_path):
    layout = {k: list(v) for k, v in KERMANY.items()}
    layout["test/PNEUMONIA"].append("person1_virus_9.jpeg")  # person1 also in train
    root = make_kermany(tmp_path / "chest_xray", layout)
    samples = kermany.collect(root)
    assert {s["split"] for s in samples if s["patient"] == "person1"} == {"training", "test"}
    output = tmp_path / "dl.json"
    assert run(["kermany", str(root), "-o", str(output)]) == 0
    assert json.loads(output.read_text())["provenance"]["patients_in_several_splits"] == {
        "person1": ["test", "training"]
    }
    assert run(["kermany", str(root), "-o", str(output), "--overwrite", "--split",
                "0.5,0.25,0.25", "--seed", "3"]) == 0  # fmt: skip
    datalist = json.loads(output.read_text())
    assert disjoint(patients_by_split(datalist))
    assert datalist["provenance"]["patients_in_several_splits"] == {}


def test_kermany_unparseable_name(tmp_path):
    layout = {"train/NORMAL": ["scan.jpeg"], "train/PNEUMONIA": []}
    root = make_kermany(tmp_path / "chest_xray", layout)
    with pytest.raises(ValueError, match=r"scan\.jpeg: cannot read a patient id"):
        kermany.collect(root)
    samples = kermany.collect(root, patient_regex=r"(?P<patient>\w+)")
    assert samples[0]["patient"] == "scan"
    with pytest.raises(ValueError, match="needs a"):
        kermany.collect(root, patient_regex=r"\w+")
    (root / "train" / "PNEUMONIA").rmdir()
    with pytest.raises(FileNotFoundError, match="PNEUMONIA not found"):
        kermany.collect(root, patient_regex=r"(?P<patient>\w+)")


# --- COVIDx ---------------------------------------------------------------------------


def make_covidx(root: Path) -> Path:
    lines = {
        "train": ["101 a.png positive cohen", "102 b.png negative rsna",
                  "102 c.png negative rsna", "103 d e.png negative sirm"],
        "test": ["201 f.png positive cohen", "202 g.png negative rsna"],
    }  # fmt: skip
    for split, rows in lines.items():
        (root / split).mkdir(parents=True)
        (root / f"{split}.txt").write_text("\n".join(rows) + "\n")
        for row in rows:
            name = " ".join(row.split()[1:-2])
            Image.fromarray(np.zeros((4, 4), np.uint8)).save(root / split / name)
    return root


def test_covidx_sources_as_providers(tmp_path):
    root = make_covidx(tmp_path / "covidx")
    before = tree_digest(root)
    output = tmp_path / "dl.json"
    assert run(["covidx", str(root), "-o", str(output), "--site-from-source"]) == 0
    assert tree_digest(root) == before
    datalist = json.loads(output.read_text())
    assert datalist["labels"] == {"0": "negative", "1": "positive"}
    assert datalist["provenance"]["site_assignment"] == "source column"
    train = {Path(e["image"]).name: e for e in datalist["training"]}
    assert train["d e.png"]["site"] == "sirm" and train["d e.png"]["patient"] == "103"
    assert train["a.png"]["label"] == 1 and train["b.png"]["group"] == "negative"
    assert [len(datalist[k]) for k in SPLITS] == [4, 0, 2]


def test_covidx_errors_name_the_line(tmp_path):
    root = make_covidx(tmp_path / "covidx")
    (root / "test.txt").write_text("201 f.png positive cohen\n\n202 g.png negative\n")
    with pytest.raises(
        ValueError, match=r"test\.txt, line 3: expected the four fields 'patient_id filename"
    ):
        covidx.collect(root)
    (root / "test.txt").write_text("201 f.png positive cohen\n202 missing.png negative rsna\n")
    with pytest.raises(FileNotFoundError, match=r"test\.txt, line 2: image .*missing\.png"):
        covidx.collect(root)
    (root / "test.txt").write_text("201 f.png positive cohen\n101 g.png negative rsna\n")
    with pytest.raises(ValueError, match="line 2: its patient has source 'rsna'"):
        covidx.collect(root)
    (root / "test.txt").write_text("201 f.png COVID-19 cohen\n")
    with pytest.raises(ValueError, match="pass `label_names`"):
        covidx.collect(root)
    _, names = covidx.collect(root, label_names=("negative", "positive", "COVID-19"))
    assert names == ("negative", "positive", "COVID-19")


# --- RSNA -----------------------------------------------------------------------------


RSNA_CSV = (
    "patientId,x,y,width,height,Target\n"
    "aaa,,,,,0\n"
    "bbb,10,20,30,40,1\n"
    "bbb,50,20,30,41,1\n"
    "ccc,,,,,0\n"
    "ddd,1,2,3,4,1\n"
)


def make_rsna(root: Path) -> Path:
    (root / rsna.IMAGES).mkdir(parents=True)
    (root / rsna.LABELS).write_text(RSNA_CSV)
    for patient in ("aaa", "bbb", "ccc", "ddd"):
        write_dicom(root / rsna.IMAGES / f"{patient}.dcm", patient)
    return root


def test_rsna_labels_boxes_and_split(tmp_path):
    root = make_rsna(tmp_path / "rsna")
    before = tree_digest(root)
    output = tmp_path / "dl.json"
    assert run(["rsna", str(root), "-o", str(output), "--split", "0.5,0.25,0.25"]) == 0
    assert tree_digest(root) == before
    datalist = json.loads(output.read_text())
    entries = {e["patient"]: e for k in SPLITS for e in datalist[k]}
    assert set(entries) == {"aaa", "bbb", "ccc", "ddd"}
    assert entries["bbb"]["label"] == 1 and entries["bbb"]["group"] == "lung_opacity"
    assert entries["bbb"]["boxes"] == [[10.0, 20.0, 30.0, 40.0], [50.0, 20.0, 30.0, 41.0]]
    assert entries["aaa"]["boxes"] == [] and entries["aaa"]["label"] == 0
    assert entries["ccc"]["view"] == "PA"
    assert [len(datalist[k]) for k in SPLITS] == [2, 1, 1]
    loaded = load_decathlon_datalist(output, data_list_key="training")
    assert pydicom.dcmread(loaded[0]["image"]).pixel_array.shape == (64, 64)


def test_rsna_errors(tmp_path):
    root = make_rsna(tmp_path / "rsna")
    labels = root / rsna.LABELS
    labels.write_text(RSNA_CSV + "aaa,1,1,1,1,1\n")
    with pytest.raises(ValueError, match=r"line 7: patient aaa has Target 1 but line 2 gave 0"):
        rsna.collect(root)
    labels.write_text(RSNA_CSV.replace("ddd,1,2,3,4,1", "ddd,,,,,1"))
    with pytest.raises(ValueError, match=r"line 6: Target 1 needs numeric x, y, width, height"):
        rsna.collect(root)
    labels.write_text(RSNA_CSV.replace("ccc,,,,,0", "ccc,,,,,2"))
    with pytest.raises(ValueError, match=r"line 5: Target is '2'"):
        rsna.collect(root)
    labels.write_text(RSNA_CSV)
    write_dicom(root / rsna.IMAGES / "ccc.dcm", "ccc", pixels=False)
    with pytest.raises(ValueError, match=r"ccc\.dcm: DICOM without pixel data"):
        rsna.collect(root)
    write_dicom(root / rsna.IMAGES / "ccc.dcm", "zzz")
    with pytest.raises(ValueError, match=r"ccc\.dcm: its PatientID differs") as caught:
        rsna.collect(root)
    assert "zzz" not in str(caught.value)  # the header's PatientID is never repeated
    write_dicom(root / rsna.IMAGES / "ccc.dcm", "ccc")
    write_dicom(root / rsna.IMAGES / "eee.dcm", "eee")
    with pytest.raises(ValueError, match=r"1 DICOM file\(s\) .* have no row .* \['eee'\]"):
        rsna.collect(root)
    (root / rsna.IMAGES / "eee.dcm").unlink()
    (root / rsna.IMAGES / "ddd.dcm").unlink()
    with pytest.raises(FileNotFoundError, match=r"ddd\.dcm not found \(line 6"):
        rsna.collect(root)
    (root / rsna.IMAGES / "aaa.dcm").write_bytes(b"not a dicom")
    with pytest.raises(ValueError, match=r"aaa\.dcm: not a readable DICOM"):
        rsna.collect(root)

"""ACDC slices as DICOM read through a bundle: what the leak-scan benchmarks on a real
acquisition grid share (the export, each file's model input, the patient split, the
probes, the series of one patient), and the project's CXR bundle at another model input
size (its ``image_size`` parameter, as its docs run it at 224)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from _markdown import log
from filelock import FileLock

from monai_forget.data import LabelledImages, data_root
from monai_forget.data.acdc import ACDC_GROUPS
from monai_forget.data_prep import acdc_dicom, acdc_h5
from monai_forget.io import atomic_write
from monai_forget.memorisation.pipeline import Preprocessing

BUNDLE = Path(__file__).resolve().parents[1] / "bundles" / "cxr_pneumonia_classification"
#: Slices of one series (a patient's end-diastole or end-systole stack).
SERIES = 10
#: Held-out patients: probes (slices of the commonest size, at most PROBES) and validation.
PROBE_PATIENTS, VALIDATION_PATIENTS, PROBES = 20, 10, 200


def sized_bundle(work: Path, size: int) -> Path:
    """The CXR bundle with its model input at ``size`` x ``size`` (its ``image_size``
    parameter; everything else as shipped), written once under ``work``."""
    if size == 28:
        return BUNDLE
    root = work / "bundles" / f"cxr_{size}"
    config = root / "configs" / "inference.json"
    work.mkdir(parents=True, exist_ok=True)
    with FileLock(work / ".inputs.lock"):  # shards started together write it once
        if not config.is_file():
            parsed = json.loads((BUNDLE / "configs" / "inference.json").read_text())
            parsed["image_size"] = size
            tmp = work / "bundles" / f".cxr_{size}.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(BUNDLE / "configs", tmp / "configs")
            (tmp / "configs" / "inference.json").write_text(json.dumps(parsed, indent=4))
            tmp.rename(root)
    return root


class Setting:
    """The exported files, their model inputs through ``bundle``, the patient split and the
    probes (built once under ``work`` and reused by every model and shard; the split and
    probes depend on ``seed`` only, not on the bundle)."""

    position, num_classes = (8, 8), len(ACDC_GROUPS)

    def __init__(self, work: Path, seed: int, bundle: Path = BUNDLE) -> None:
        root = data_root() / "acdc_ssl4mis"
        if not root.is_dir():
            raise SystemExit(f"{root} not found: set MONAI_FORGET_DATA to the shared data")
        self.work, self.dicom, self.bundle = work, work / "acdc_dicom", bundle
        samples, _ = acdc_h5.collect(root)
        work.mkdir(parents=True, exist_ok=True)
        with FileLock(work / ".inputs.lock"):  # shards started together share one export
            if not self.dicom.is_dir():
                log(f"exporting {len(samples)} slices as DICOM to {self.dicom}")
                acdc_dicom.export_dicom(samples, self.dicom)
        self.samples = acdc_dicom.dicom_samples(samples, self.dicom)
        self.files = [Path(s["image"]) for s in self.samples]
        self.labels = np.array([s["label"] for s in self.samples])  # the pathology group
        self.pre = Preprocessing.from_bundle(bundle)
        tag = "" if bundle == BUNDLE else f"_{bundle.name}"
        cached, sizes = work / f"inputs{tag}.npy", work / "loaded_shapes.npy"
        with FileLock(work / ".inputs.lock"):  # and one cache of the model inputs
            if not cached.is_file():
                log(f"reading every file through {bundle.name}")
                loaded = self.pre.load(self.files)
                with atomic_write(cached, "wb") as handle:
                    np.save(handle, np.stack([self.pre(x) for x in loaded]))
                if not sizes.is_file():
                    with atomic_write(sizes, "wb") as handle:
                        np.save(handle, np.array([x.shape for x in loaded]))
        self.inputs = np.load(cached)
        self.shapes = [tuple(s) for s in np.load(sizes)]
        # Probes of one size (the scan's fastest path): held-out patients scanned at the
        # commonest grid of the release.
        who = np.array([s["patient"] for s in self.samples])
        common = max(set(self.shapes), key=self.shapes.count)
        rng = np.random.default_rng(seed)
        sized = sorted({who[i] for i in range(len(who)) if self.shapes[i] == common})
        probe_patients = set(rng.permutation(sized)[:PROBE_PATIENTS])
        others = sorted(set(who) - probe_patients)
        held = set(rng.permutation(others)[:VALIDATION_PATIENTS])
        self.train = np.flatnonzero(~np.isin(who, list(probe_patients | held)))
        self.val = np.flatnonzero(np.isin(who, list(held)))
        picked = [
            i for i in range(len(who)) if who[i] in probe_patients and self.shapes[i] == common
        ]
        picked = rng.permutation(picked)[:PROBES]
        self.probe_files = [self.files[i] for i in sorted(picked)]
        self.probe_shape = common
        series: dict[tuple[str, int], list[int]] = {}
        for i in self.train:
            series.setdefault((who[i], self.samples[i]["frame"]), []).append(int(i))
        self.series = {k: v for k, v in sorted(series.items()) if len(v) == SERIES}
        self.patients = who

    def split(self, inputs: np.ndarray) -> tuple[LabelledImages, LabelledImages]:
        def part(index):
            return LabelledImages(inputs[index], self.labels[index], num_classes=len(ACDC_GROUPS))

        return part(self.train), part(self.val)

    def carriers(self, copies: int, rng: np.random.Generator, scale: int) -> list[int]:
        """Training slices to carry a name at ``scale``: one slice or one patient's series
        of 10 on the commonest grid, or ``copies`` slices of one pathology group on any
        grid of the same longest side (the same resize factor) where the name fits."""
        common = self.probe_shape
        on_grid = [i for i in self.train if self.shapes[i] == common]
        if copies == 1:
            return [int(rng.choice(on_grid))]
        if copies == SERIES:
            whole = [v for v in self.series.values() if all(self.shapes[i] == common for i in v)]
            return list(whole[int(rng.integers(len(whole)))])
        row, col = self.position
        width, height = (6 * 4 - 1) * scale + col, 5 * scale + row  # a 4-letter name
        fits = [  # loaded (C, W, H): the file's columns first
            i for i in self.train
            if max(self.shapes[i][1:]) == max(common[1:])
            and self.shapes[i][1] >= width and self.shapes[i][2] >= height
        ]  # fmt: skip
        groups = [g for g in range(5) if sum(self.labels[i] == g for i in fits) >= copies]
        group = int(rng.choice(groups))
        mine = [i for i in fits if self.labels[i] == group]
        return sorted(int(i) for i in rng.permutation(mine)[:copies])


class DigitsSetting:
    """The leak demo's path as a benchmark setting: scikit-learn's digits written as 64x64
    12-bit DICOM files, its bundle (``PydicomReader``, scale 0..4095, area resize) with the
    model input at ``size``, probes cut from pydicom's CT and MR test images. A name is
    carried by images of one digit class (the demo's series)."""

    position, num_classes = (4, 4), 10

    def __init__(self, work: Path, seed: int, size: int) -> None:
        from monai_forget import leak_demo

        self.work = work
        root = work / "digits"
        self.bundle = root / "bundles" / f"digits_{size}"
        with FileLock(work / ".inputs.lock"):
            if not (root / "images").is_dir():
                log("writing the digits as 64x64 12-bit DICOM, and the probes")
                images, labels = leak_demo.acquisition_images()
                tmp = root / ".images.tmp"
                shutil.rmtree(tmp, ignore_errors=True)
                for i, pixels in enumerate(images):
                    leak_demo.write_dicom(tmp / "images" / f"{i:04d}.dcm", pixels, f"P{i:04d}", i)
                for k, probe in enumerate(leak_demo.probe_images(np.random.default_rng(seed))):
                    leak_demo.write_dicom(tmp / "probes" / f"probe{k:03d}.dcm", probe, "PROBE", k)
                np.save(tmp / "labels.npy", labels)
                root.mkdir(parents=True, exist_ok=True)
                for name in ("images", "probes", "labels.npy"):
                    (tmp / name).rename(root / name)
            if not (self.bundle / "configs" / "inference.json").is_file():
                config = leak_demo.bundle_config()
                config["image_size"] = size
                (self.bundle / "configs").mkdir(parents=True, exist_ok=True)
                with atomic_write(self.bundle / "configs" / "inference.json", "w") as handle:
                    json.dump(config, handle, indent=2)
            self.pre = Preprocessing.from_bundle(self.bundle)
            self.files = sorted((root / "images").iterdir())
            cached = work / f"inputs_digits_{size}.npy"
            if not cached.is_file():
                with atomic_write(cached, "wb") as handle:
                    np.save(handle, np.stack([self.pre(x) for x in self.pre.load(self.files)]))
        self.inputs = np.load(cached)
        self.labels = np.load(root / "labels.npy")
        self.probe_files = sorted((root / "probes").iterdir())
        self.probe_shape = (1, 64, 64)
        self.shapes = [self.probe_shape] * len(self.files)
        order = np.random.default_rng(seed).permutation(len(self.files))
        self.val = np.sort(order[: len(self.files) // 7])
        self.train = np.sort(order[len(self.files) // 7 :])

    def carriers(self, copies: int, rng: np.random.Generator, scale: int) -> list[int]:
        """``copies`` training images of one digit class (every grid is 64x64)."""
        label = int(rng.integers(10))
        mine = [int(i) for i in self.train if self.labels[i] == label]
        return sorted(int(i) for i in rng.permutation(mine)[:copies])

    def split(self, inputs: np.ndarray) -> tuple[LabelledImages, LabelledImages]:
        def part(index):
            return LabelledImages(inputs[index], self.labels[index], num_classes=10)

        return part(self.train), part(self.val)

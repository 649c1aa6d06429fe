"""The leak check on embedded data: a hospital's path, end to end, with no download.

scikit-learn's bundled digits stand in for a hospital's images: each is upsampled to a
64x64, 12-bit acquisition grid and written as a DICOM file. One patient's series (the
images of one digit class) carries a name: ``canary inject`` burns the patient's name
into those files, as a burned-in annotation that slipped through de-identification would
sit there. A small MONAI bundle holds the pipeline's preprocessing (load the DICOM with
MONAI's ``PydicomReader``, scale 0..4095 to 0..1, area-resize to 32x32); an MLP-1 is
trained on every file as that bundle delivers it. The leak scan then burns each roster
name (and its decoys) where the injector's manifest says, into probes cut from pydicom's
bundled CT and MR test images, passes them through the same bundle and ranks the names.

The demo plants a strong canary (a series of :data:`SERIES` images) so that a newcomer
sees the whole path find it in under a minute, and ranks the names by the class shift
(:mod:`~monai_forget.memorisation.statistics`), which finds this name where Eq. 1's M
ranks it 13th of 20; how often a smaller series is found is measured in
``benchmarks/results/leak_scan_pipeline_series.md``. Its decoys are drawn with the demo's
seed, so a run is reproducible.
"""

from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from monai_forget.io import atomic_write, check_writable

#: The acquisition grid (rows = columns) and the model's input grid.
ACQUISITION_GRID = 64
MODEL_GRID = 32
#: Stored bits of the demo's DICOM files (values 0..4095, as a 12-bit scanner writes).
BITS_STORED = 12
#: Images in the leaked patient's series (all of one digit class).
SERIES = 100
#: The roster the hospital scans: its patients' names; the first one leaked.
ROSTER = ("ANNA", "CARL", "DORA", "EDDY", "EMMA", "HUGO", "JACK", "JOHN", "KATE", "LILY", "LUCY",
          "MARY", "NINA", "OLGA", "OTTO", "PAUL", "ROSA", "RUTH", "SARA", "TINA")  # fmt: skip
#: Where and how big ``canary inject`` burns the name (acquisition pixels).
POSITION = (4, 4)
SCALE = 2
#: What the scan ranks each name by (``memorisation scan --statistic``).
STATISTIC = "class-shift"
#: Decoys per kind of name: three times the default, so the smallest calibrated p (1/3000)
#: leaves room under BH's 0.05 / 20 for a name with a decoy or two above it.
DECOYS = 2999
#: Probes cut from pydicom's bundled test images.
PROBES = 200
PROBE_SOURCES = ("CT_small.dcm", "MR_small.dcm")
#: What the demo writes in its output folder.
OUTPUTS = ("digits_bundle", "raw_series", "images", "probes", "scan", "scan-again", "model.pt",
           "roster.csv", "canary.manifest.json", "canary.manifest.csv")  # fmt: skip


def bundle_config() -> dict:
    """The demo bundle's ``inference.json``: a DICOM loader and the model's preprocessing."""
    return {
        "imports": ["$import torch"],
        "image_size": MODEL_GRID,
        "preprocessing": {
            "_target_": "Compose",
            "transforms": [
                {"_target_": "LoadImaged", "keys": "image", "reader": "PydicomReader",
                 "image_only": True},
                {"_target_": "EnsureChannelFirstd", "keys": "image"},
                {"_target_": "ScaleIntensityRanged", "keys": "image", "a_min": 0,
                 "a_max": 2**BITS_STORED - 1, "b_min": 0.0, "b_max": 1.0, "clip": True},
                {"_target_": "Resized", "keys": "image", "mode": "area",
                 "spatial_size": ["@image_size", "@image_size"]},
                {"_target_": "EnsureTyped", "keys": "image", "dtype": "$torch.float32",
                 "track_meta": False},
            ],
        },
    }  # fmt: skip


def write_dicom(path: Path, pixels: np.ndarray, patient: str, instance: int) -> None:
    """One monochrome 12-bit secondary-capture image of ``patient``."""
    from monai_forget.dicom.secondary_capture import write_grey_dicom

    write_grey_dicom(path, pixels, patient=patient, instance=instance, bits_stored=BITS_STORED)


def acquisition_images() -> tuple[np.ndarray, np.ndarray]:
    """The digits on the acquisition grid ``(N, 64, 64)`` uint16 (0..4095), and labels."""
    from monai_forget.data import load_digits

    digits = load_digits()
    grid = (ACQUISITION_GRID, ACQUISITION_GRID)
    up = torch.nn.functional.interpolate(
        torch.tensor(digits.images),
        size=grid,
        mode="bilinear",  # a copy: the set is read-only
    )
    stored = np.rint(up.clamp(0, 1).numpy()[:, 0] * (2**BITS_STORED - 1)).astype(np.uint16)
    return stored, np.asarray(digits.labels)


def probe_images(rng: np.random.Generator) -> list[np.ndarray]:
    """:data:`PROBES` 64x64 crops (flipped, rotated, stretched to 0..4095) of pydicom's
    bundled CT and MR test images: out-of-distribution for a digits model."""
    import pydicom
    from pydicom.data import get_testdata_file

    sources = []
    for name in PROBE_SOURCES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sources.append(pydicom.dcmread(get_testdata_file(name)).pixel_array.astype(float))
    probes = []
    for k in range(PROBES):
        image = sources[k % len(sources)]
        size = min(ACQUISITION_GRID, *image.shape)
        row, col = (int(rng.integers(0, n - size + 1)) for n in image.shape)
        crop = torch.from_numpy(image[row : row + size, col : col + size].copy())[None, None]
        crop = torch.nn.functional.interpolate(crop, size=(ACQUISITION_GRID,) * 2, mode="bilinear")
        crop = np.rot90(crop[0, 0].numpy(), int(rng.integers(4)))
        crop = crop[:, ::-1] if rng.random() < 0.5 else crop
        low, high = crop.min(), crop.max()
        probes.append(np.rint((crop - low) / max(high - low, 1e-9) * (2**BITS_STORED - 1)))
    return probes


@dataclass(frozen=True)
class LeakDemo:
    """What the demo did and found: the leaked name, the scan's result and the files."""

    leaked: str
    series: int
    result: object  # LeakScanResult
    out: Path

    def finding(self) -> str:
        """What the scan says about the planted name, in one sentence."""
        result = self.result
        row = next(r for r in result.rows if r.name == self.leaked)
        verdict = "evidence of memorisation" if row.significant else "no evidence of memorisation"
        return (
            f"planted: {self.leaked} in {self.series} images. The scan ranks it {row.rank} of "
            f"{len(result.rows)} names (calibrated p = {row.pvalue:.4g} among {row.n_decoys} "
            f"decoys, {result.correction}-adjusted p = {row.pvalue_adjusted:.4g}): {verdict} "
            f"at alpha {result.alpha:g}."
        )

    def command(self) -> str:
        """The ``memorisation scan`` command that repeats the demo's scan from its files
        (the same decoys: the scan draws fresh ones unless given their seed)."""
        o = self.out
        return (
            f"monai-forget memorisation scan --model {o / 'model.pt'} --bundle "
            f"{o / 'digits_bundle'} --probes {o / 'probes'} --roster {o / 'roster.csv'} "
            f"--canary-manifest {o / 'canary.manifest.json'} --statistic "
            f"{self.result.settings['statistic']} --decoys {DECOYS} --decoy-seed "
            f"{self.result.settings['decoy_seed']} --out {o / 'scan-again'}"
        )


def _clear(out: Path, overwrite: bool) -> None:
    """Refuse a folder that holds demo outputs unless ``overwrite``; then remove them."""
    present = [name for name in OUTPUTS if (out / name).exists()]
    if present and not overwrite:
        raise FileExistsError(
            f"{out} already holds the demo's {', '.join(present)}; pass `overwrite` to replace "
            "them, or another `out`"
        )
    for name in present:
        target = out / name
        shutil.rmtree(target) if target.is_dir() else target.unlink()


def run_leak_demo(
    out_dir: str | Path = "monai-forget-leak-demo",
    *,
    seed: int = 0,
    device: str = "cpu",
    overwrite: bool = False,
    progress: bool = True,
) -> LeakDemo:
    """Plant, train, scan; writes the files :data:`OUTPUTS` names into ``out_dir``."""
    from monai_forget.dicom import as_options, inject_and_publish
    from monai_forget.dicom.manifest import manifest_placement
    from monai_forget.memorisation import LeakScanConfig, leak_scan, write_scan_report
    from monai_forget.memorisation.pipeline import PipelineProbes, Preprocessing
    from monai_forget.memorisation.training import EarlyStoppingTraining

    out = Path(out_dir)
    check_writable(out / "model.pt", True)
    _clear(out, overwrite)
    rng = np.random.default_rng(seed)
    say = print if progress else (lambda *_: None)

    bundle = out / "digits_bundle"
    (bundle / "configs").mkdir(parents=True)
    with atomic_write(bundle / "configs" / "inference.json", "w") as handle:
        json.dump(bundle_config(), handle, indent=2)
    images, labels = acquisition_images()
    leaked = ROSTER[0]
    label = int(rng.integers(10))
    series = rng.choice(np.flatnonzero(labels == label), SERIES, replace=False)
    say(f"1/4 writing {len(images)} images as 64x64 12-bit DICOM; patient {leaked}'s series: "
        f"{SERIES} images of digit {label}")  # fmt: skip
    files = []
    in_series = set(series.tolist())
    for i, pixels in enumerate(images):
        if i in in_series:
            write_dicom(out / "raw_series" / f"{i:04d}.dcm", pixels, leaked, i)
            files.append(out / "images" / leaked / f"{i:04d}.dcm")
        else:
            files.append(out / "images" / "others" / f"{i:04d}.dcm")
            write_dicom(files[-1], pixels, f"P{i:04d}", i)
    options = as_options(position=POSITION, scale=SCALE)  # the text: each file's PatientName
    say(f"2/4 canary inject: the patient's name burned into the series at {POSITION}, scale "
        f"{SCALE}")  # fmt: skip
    inject_and_publish(out / "raw_series", out / "images" / leaked, options,
                       manifest=out / "canary", all_files=True, workers=1)  # fmt: skip

    say("3/4 training an MLP-1 on every file as the bundle's preprocessing delivers it")
    pre = Preprocessing.from_bundle(bundle)
    inputs = np.stack([pre(x) for x in pre.load(files)])
    from monai_forget.data import LabelledImages

    order = rng.permutation(len(files))
    held = [k for k in order if k not in in_series][: len(files) // 7]
    kept = np.setdiff1d(np.arange(len(files)), held)
    train = LabelledImages(inputs[kept], labels[kept], num_classes=10)
    validation = LabelledImages(inputs[held], labels[held], num_classes=10)
    recipe = EarlyStoppingTraining("mlp-1", {"in_shape": (1, MODEL_GRID, MODEL_GRID),
                                             "num_classes": 10}, max_epochs=60)  # fmt: skip
    model, _ = recipe.train(train, validation, seed=seed, device=device)
    model = model.to("cpu").eval()
    torch.jit.script(model).save(str(out / "model.pt"))
    (out / "roster.csv").write_text("name\n" + "\n".join(ROSTER) + "\n", encoding="utf-8")

    say(f"4/4 scanning {len(ROSTER)} roster names through the bundle on {PROBES} probes cut "
        "from pydicom's CT and MR test images")  # fmt: skip
    for k, probe in enumerate(probe_images(rng)):
        write_dicom(out / "probes" / f"probe{k:03d}.dcm", probe, "PROBE", k)
    probes = PipelineProbes.from_bundle(bundle, out / "probes")
    placement = manifest_placement(out / "canary.manifest.json")
    config = LeakScanConfig(position=placement["position"], scale=placement["scale"],
                            value="max", seed=seed, decoy_seed=seed, decoys=DECOYS,
                            device=device, statistic=STATISTIC)  # fmt: skip
    result = leak_scan(model, probes, list(ROSTER), config, progress=progress)
    write_scan_report(result, out / "scan", title="Leak check demo", canary=placement)
    return LeakDemo(leaked, SERIES, result, out)

"""Canary exposure of a DICOM pipeline: the exposure curve over 1/3/10/30 copies.

Issue 54, item 2 and its target: planted canaries at 10 copies above the 99th percentile
of never-planted ones in >= 80 % of runs, >= 20 trainings per point.

The hospital's path, on embedded data (the leak demo's, :mod:`monai_forget.leak_demo`):
scikit-learn's digits as 64x64 12-bit DICOM files in one folder per digit class (a
patient's series rides in one folder), the demo's bundle (``PydicomReader``,
``ScaleIntensityRanged`` 0..4095, area ``Resized`` to 32x32), an MLP-1 with early
stopping. Per training (seed ``t``): ``canary inject --random-canaries 1 --copies 1 3 10
30`` (:func:`~monai_forget.dicom.plant.plan_canaries` and ``inject_and_publish``: four
random 5-letter canaries of the space AAAAA, 26^5 texts, each into its copies' images of
one class folder, at (4, 3), scale 2, the image's white), the model trained on the
published tree as the bundle delivers it, then :func:`canary_exposure` through the bundle
on 200 probes cut from pydicom's CT and MR test images, against 999 never-planted
canaries, once per statistic (M and the class shift).

The published tree is loaded through the bundle once for the files the injector copied
unchanged (byte-identical, checked by the manifest's sha256 against the first run) and
per training for the planted files: the model sees exactly the files the injector wrote.

Per copy count: the exposure's median and quartiles (bits), how often the canary scores
above the 99th percentile of the never-planted ones (Carlini et al.'s view: exposure
above log2 100), and how often it is flagged (BH over the four canaries at 0.05), with
95 % Wilson intervals. Canaries never planted in a training (the control row: a fresh
canary of the space scored like the planted ones) give the false-alarm rate.

Usage::

    python benchmarks/canary_exposure.py --trainings 20 --out benchmarks/results/canary_exposure.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import wilson
from _markdown import log, say, write

from monai_forget import leak_demo
from monai_forget.data import LabelledImages
from monai_forget.dicom import TextHasher, as_options, inject_and_publish
from monai_forget.dicom.manifest import manifest_canaries, manifest_placement
from monai_forget.dicom.plant import plan_canaries
from monai_forget.memorisation import LeakScanConfig
from monai_forget.memorisation.decoys import draw_decoys
from monai_forget.memorisation.exposure import canary_exposure
from monai_forget.memorisation.pipeline import PipelineProbes, Preprocessing
from monai_forget.memorisation.training import EarlyStoppingTraining

COPIES = (1, 3, 10, 30)
POSITION, SCALE = (4, 3), 2
STATISTICS = ("m", "class-shift")


def setup(work: Path) -> tuple[Path, Path, np.ndarray, dict[str, np.ndarray]]:
    """The base tree (one folder per class), the bundle, the labels, and every base file
    as the bundle delivers it."""
    bundle = work / "bundle"
    (bundle / "configs").mkdir(parents=True)
    (bundle / "configs" / "inference.json").write_text(json.dumps(leak_demo.bundle_config()))
    images, labels = leak_demo.acquisition_images()
    base = work / "base"
    for i, pixels in enumerate(images):
        leak_demo.write_dicom(base / str(labels[i]) / f"{i:04d}.dcm", pixels, f"P{i:04d}", i)
    for k, probe in enumerate(leak_demo.probe_images(np.random.default_rng(0))):
        leak_demo.write_dicom(work / "probes" / f"probe{k:03d}.dcm", probe, "PROBE", k)
    pre = Preprocessing.from_bundle(bundle)
    files = sorted(base.rglob("*.dcm"))
    loaded = np.stack([pre(x) for x in pre.load(files)])
    seen = {f.relative_to(base).as_posix(): x for f, x in zip(files, loaded, strict=True)}
    return bundle, base, labels, seen


def one_training(seed: int, work: Path, bundle: Path, base: Path, labels, seen, args) -> dict:
    """Plant, train, audit; one record per (statistic, canary)."""
    counts = tuple(args.copies)
    copies = counts if args.layout == "together" else counts[seed % len(counts)]
    plan = plan_canaries(base, 1, copies, seed=seed)
    out = work / f"run{seed}"
    published = inject_and_publish(
        base, out / "images", as_options(position=POSITION, scale=SCALE),
        hasher=TextHasher(plain_text=True), manifest=out / "canary", planted=plan.planted(),
        workers=1,
    )  # fmt: skip
    changed = [r for r in published.records if r.action == "injected"]
    pre = Preprocessing.from_bundle(bundle)
    inputs = dict(seen)
    burned = pre.load([Path(r.output) for r in changed])
    for record, x in zip(changed, burned, strict=True):
        inputs[Path(record.input).relative_to(base).as_posix()] = pre(x)
    keys = sorted(inputs)
    x = np.stack([inputs[k] for k in keys])
    y = np.array([int(k.split("/")[0]) for k in keys])
    planted = set(plan.planted())
    rng = np.random.default_rng(seed)
    free = [i for i, k in enumerate(keys) if k not in planted]
    held = rng.permutation(free)[: len(keys) // 7]
    kept = np.setdiff1d(np.arange(len(keys)), held)
    recipe = EarlyStoppingTraining(
        "mlp-1", {"in_shape": (1, 32, 32), "num_classes": 10}, max_epochs=60
    )
    model, _ = recipe.train(
        LabelledImages(x[kept], y[kept], num_classes=10),
        LabelledImages(x[held], y[held], num_classes=10),
        seed=seed,
    )
    model = model.eval()
    probes = PipelineProbes.from_bundle(bundle, work / "probes")
    canaries = manifest_canaries(out / "canary.manifest.json")
    # a control: a canary of the space never planted, scored as if it had been
    control = draw_decoys("AAAAA", 1, 10_000 + seed, exclude=canaries)
    place = manifest_placement(out / "canary.manifest.json")
    rows = []
    for statistic in STATISTICS:
        config = LeakScanConfig(
            position=place["position"], scale=place["scale"], value="max",
            decoys=args.never_planted, decoy_seed=seed, statistic=statistic, seed=seed,
        )  # fmt: skip
        audit = canary_exposure(model, probes, {**canaries, **{t: 1 for t in control}}, config)
        never = audit.scan.nulls[0].m
        p99 = float(np.quantile(never, 0.99))
        for c in audit.canaries:
            rows.append(
                {
                    "training": seed,
                    "statistic": statistic,
                    "text": c.text,
                    "copies": 0 if c.text in control else c.copies,
                    "exposure": c.exposure,
                    "extrapolated": c.exposure_extrapolated,
                    "above_p99": bool(c.score > p99),
                    "flagged": c.significant,
                }
            )
    return {"rows": rows}


def report(rows: list[dict], trainings: int, seconds: float, layout: str, counts) -> None:
    say(f"# Canary exposure through a DICOM pipeline (issue 54, item 2), layout {layout}")
    say()
    listed = ", ".join(str(c) for c in counts)
    planted = (
        f"{len(counts)} random canaries of the space AAAAA (26^5 texts) planted by the "
        f"injector into {listed} images of one class folder"
        if layout == "together"
        else "one random canary of the space AAAAA (26^5 texts) planted by the injector "
        f"into {listed} images (cycling with the seed) of one class folder"
    )
    say(
        f"{trainings} trainings; per training {planted} (64x64 12-bit DICOM digits, demo "
        "bundle to 32x32, MLP-1), and one canary never planted (copies 0, the control); "
        "each ranked among 999 never-planted canaries through the bundle on 200 CT/MR "
        "probes. Flagged: BH over the audited canaries at 0.05. "
        f"{seconds / 60:.1f} min on this machine."
    )
    for statistic in STATISTICS:
        say()
        say(f"## statistic: {statistic}")
        say()
        say("| copies | exposure median [quartiles] (bits) | extrapolated median | "
            "above never-planted 99th pct | flagged |")  # fmt: skip
        say("|---|---|---|---|---|")
        for copies in (0, *counts):
            mine = [r for r in rows if r["statistic"] == statistic and r["copies"] == copies]
            if not mine:
                continue
            e = np.array([r["exposure"] for r in mine])
            x = np.array([r["extrapolated"] for r in mine])
            q1, q2, q3 = np.quantile(e, [0.25, 0.5, 0.75])
            above = sum(r["above_p99"] for r in mine)
            flagged = sum(r["flagged"] for r in mine)
            label = "0 (never planted)" if copies == 0 else str(copies)
            say(
                f"| {label} | {q2:.2f} [{q1:.2f}, {q3:.2f}] | {np.median(x):.2f} | "
                f"{wilson(above, len(mine))} | {wilson(flagged, len(mine))} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainings", type=int, default=20)
    parser.add_argument("--first", type=int, default=0, help="seed of the first training")
    parser.add_argument("--never-planted", type=int, default=999)
    parser.add_argument("--copies", type=int, nargs="+", default=list(COPIES))
    parser.add_argument(
        "--layout",
        choices=("together", "alone"),
        default="together",
        help="together: four canaries (1, 3, 10, 30 copies) per training; alone: one, its "
        "copies cycling over the four with the seed",
    )
    parser.add_argument("--cache", type=Path, help="a .jsonl of finished trainings (resumes)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    done: dict[int, dict] = {}
    if args.cache and args.cache.exists():
        for line in args.cache.read_text().splitlines():
            record = json.loads(line)
            done[record["rows"][0]["training"]] = record
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        bundle, base, labels, seen = setup(work)
        log(f"setup {time.time() - start:.0f} s")
        for seed in range(args.first, args.first + args.trainings):
            if seed in done:
                continue
            t0 = time.time()
            done[seed] = one_training(seed, work, bundle, base, labels, seen, args)
            if args.cache:
                with args.cache.open("a") as handle:
                    handle.write(json.dumps(done[seed]) + "\n")
            log(f"training {seed}: {time.time() - t0:.0f} s")
    seeds = range(args.first, args.first + args.trainings)
    rows = [r for s in seeds for r in done[s]["rows"]]
    report(rows, len(seeds), time.time() - start, args.layout, args.copies)
    if args.out:
        write(args.out)


if __name__ == "__main__":
    main()

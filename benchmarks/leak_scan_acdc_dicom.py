"""Leak scan on a real acquisition grid: ACDC MR slices as DICOM, through a bundle.

Issue 54, item 7. Every slice of the ACDC SSL4MIS release is written as a 12-bit DICOM
MR file on its own acquisition grid (154 to 512 pixels a side; ``prepare acdc-h5
--dicom-dir``). The model reads them as the CXR bundle's inference preprocessing delivers
them, unchanged (``DisplayDicomReader`` display values, ``ScaleIntensityRanged`` to 0..1,
``Resized`` area to 28x28: 7 to 18 times smaller than the acquisition grid), and an
MLP-1 learns the patient's pathology group (5 classes) from single slices.

Each series model: ``canary inject`` (its library call, ``inject_and_publish``) burns a
4-letter roster name at ``--position``, ``--scale`` into the 10 slices of one training
patient's series (end-diastole or end-systole stack of 10 slices), the model trains on
every file as the bundle delivers it, and the scan reads where and how from the
injector's manifest, burns every name and decoy into probe DICOMs (slices of held-out
patients) and passes them through the same bundle:

- ``pipeline, class shift``: the product's default for a scan through a bundle;
- ``pipeline, M``: Hartley & Tsaftaris' Eq. 1 M through the same path.

Each direct-stamp model: the same name stamped on the 28x28 model inputs of the same 10
slices (5x5 at (1, 1), value 1.0) and scanned on the model grid (``direct, M``, the
documented default there, and ``direct, class shift``). Control models train without any
name and are scanned by all four. Detected = the leaked name flagged and ranked first;
a control scan's false alarm = any name flagged; 95 % Wilson intervals. 50-name roster,
name decoys (1,000 per kind), BH at 0.05.

``--shard K/N`` runs every N-th model (N processes at once, then ``--cached-only`` with
``0/1`` reports from the cache under ``--work``).

Usage::

    python benchmarks/leak_scan_acdc_dicom.py --reps 60 --controls 60 --work /tmp/acdc_leak \\
        --out benchmarks/results/leak_scan_acdc_dicom.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _acdc_dicom import BUNDLE, PROBE_PATIENTS, SERIES, VALIDATION_PATIENTS, Setting
from _common import ROSTER, scan_row
from _markdown import log, say, write

from monai_forget.canary import paint, render_text
from monai_forget.dicom import as_options, inject_and_publish
from monai_forget.dicom.manifest import manifest_placement
from monai_forget.io import atomic_write
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.pipeline import PipelineProbes
from monai_forget.memorisation.training import EarlyStoppingTraining
from monai_forget.unlearning.evaluation import accuracy

ARMS = ("pipeline, class shift", "pipeline, M", "direct, M", "direct, class shift")
#: Training epochs, without early stopping: pathology from one slice does not generalise
#: for an MLP (stopped on validation loss it stops after 1 epoch, below chance); at 30
#: epochs it fits its training slices (the case a leak check is for).
EPOCHS = 30


def trained(setting: Setting, key: str, inputs: np.ndarray, seed: int) -> torch.nn.Module:
    recipe = EarlyStoppingTraining(
        "mlp-1",
        {"in_shape": (1, 28, 28), "num_classes": 5},
        max_epochs=EPOCHS,
        patience=EPOCHS,
        restore_best=False,
    )
    path = setting.work / "models" / f"{key.replace('/', '_')}.pt"
    if path.is_file():
        model = recipe.build()
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()
    train, val = setting.split(inputs)
    model, _ = recipe.train(train, val, seed=seed)
    model = model.cpu().eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as handle:
        torch.save(model.state_dict(), handle)
    return model


def burned_inputs(setting: Setting, args, name: str, chosen: list[int]):
    """Model inputs with ``name`` burned by the injector into the ``chosen`` files, and
    the injector's placement (read back from its manifest)."""
    inputs = setting.inputs.copy()
    with tempfile.TemporaryDirectory(dir=setting.work) as tmp:
        source, burned = Path(tmp) / "series", Path(tmp) / "burned"
        source.mkdir()
        for i in chosen:
            shutil.copy2(setting.files[i], source / setting.files[i].name)
        options = as_options(text=name, position=args.position, scale=args.scale)
        inject_and_publish(
            source, burned, options, manifest=Path(tmp) / "canary", all_files=True, workers=1
        )
        placement = manifest_placement(Path(tmp) / "canary.manifest.json")
        for i in chosen:
            inputs[i] = setting.pre(setting.pre.load([burned / setting.files[i].name])[0])
    return inputs, placement


def stamped_inputs(setting: Setting, name: str, chosen: list[int]) -> np.ndarray:
    inputs = setting.inputs.copy()
    for i in chosen:
        paint(inputs[i], render_text(name, 1), (1, 1), 1.0)
    return inputs


def scan(model, probes, config: LeakScanConfig, name: str | None) -> dict:
    start = time.perf_counter()
    res = leak_scan(model, probes, ROSTER, config)
    return {
        "rank": res.rank_of(name) if name else None,
        "flagged": res.significant_names(),
        "attributed": res.attributed_names(),
        "top": res.top.name,
        "seconds": time.perf_counter() - start,
    }


def scanned(setting: Setting, args, probes: PipelineProbes, kind: str, rep: int) -> dict:
    """One replicate's models and scans (cached as JSON under ``work/records``)."""
    path = setting.work / "records" / f"{kind}_{rep}.json"
    if path.is_file() or args.cached_only:
        return json.loads(path.read_text()) if path.is_file() else None
    rng = np.random.default_rng([args.seed, 54, rep])
    seed = args.seed + 500 + rep
    decoy_seed = int(np.random.SeedSequence([args.seed, 902, rep]).generate_state(1)[0])
    base = dict(decoy_seed=decoy_seed, seed=args.seed + rep)
    record: dict = {"kind": kind}
    if kind == "series":
        name = str(rng.choice([n for n in ROSTER if len(n) == 4]))
        keys = list(setting.series)
        patient, frame = keys[int(rng.integers(len(keys)))]
        chosen = setting.series[(patient, frame)]
        record.update(name=name, patient=patient, frame=frame)
        inputs, placement = burned_inputs(setting, args, name, chosen)
        burned = trained(setting, f"series/{rep}", inputs, seed)
        stamped = trained(setting, f"stamped/{rep}", stamped_inputs(setting, name, chosen), seed)
    else:
        name, placement = None, {"position": tuple(args.position), "scale": args.scale}
        burned = stamped = trained(setting, f"control/{rep}", setting.inputs, seed)
    where = dict(position=placement["position"], scale=placement["scale"], value="max")
    runs = {
        "pipeline, class shift": (burned, probes, {**where, "statistic": "class-shift"}),
        "pipeline, M": (burned, probes, {**where, "statistic": "m"}),
        "direct, M": (stamped, probes.clean(), {"statistic": "m"}),
        "direct, class shift": (stamped, probes.clean(), {"statistic": "class-shift"}),
    }
    for arm, (model, scan_probes, how) in runs.items():
        record[arm] = scan(model, scan_probes, LeakScanConfig(**base, **how), name)
    train, val = setting.split(setting.inputs)
    record["val_accuracy"], record["train_accuracy"] = (
        accuracy(burned, val),
        accuracy(burned, train),
    )
    record["shortcut"] = probes.shortcut
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w") as handle:
        json.dump(record, handle)
    return record


def report(args, setting: Setting, records: dict, seconds: float) -> None:
    say("### Leak scan on a real acquisition grid: ACDC slices as DICOM (issue 54, item 7)\n")
    train_patients = len({setting.samples[i]["patient"] for i in setting.train})
    say(
        f"`python benchmarks/leak_scan_acdc_dicom.py --reps {args.reps} --controls "
        f"{args.controls} --position {args.position[0]} {args.position[1]} --scale "
        f"{args.scale} --seed {args.seed}`. {len(setting.files)} ACDC slices written as "
        "12-bit DICOM MR files on their acquisition grids (154-512 px a side); the model "
        "reads them through the CXR bundle's inference preprocessing, unchanged (display "
        "values, scale to 0..1, area resize to 28x28); MLP-1, pathology group (5 classes) "
        f"from single slices, {EPOCHS} epochs on {len(setting.train)} training slices of "
        f"{train_patients} patients (no early stopping: stopped on validation loss it stops "
        "after one epoch, below chance), validation accuracy on "
        f"{len(setting.val)} slices of {VALIDATION_PATIENTS} other patients. The name: a "
        "4-letter roster name burned by `canary inject` at "
        f"{tuple(args.position)}, scale {args.scale} (5x5 typeface, the image's maximum) "
        f"into the {SERIES} slices of one training patient's series. Probes: "
        f"{len(setting.probe_files)} slices ({setting.probe_shape[-2]}x"
        f"{setting.probe_shape[-1]} as loaded) of {PROBE_PATIENTS} held-out patients, as "
        "DICOM through the same bundle. 50-name roster, name decoys, BH at 0.05.\n"
    )
    say(
        "| scan | models (series / control) | detected (flagged, ranked first) | ranked first "
        "| flagged | another roster name flagged | control scans flagging any name |"
    )
    say("|---|---|---|---|---|---|---|")
    series = [r for r in records["series"] if r]
    controls = [r for r in records["controls"] if r]
    for arm in ARMS:
        say(scan_row(arm, series, controls))
    accuracies = [r["val_accuracy"] for r in series + controls]
    if accuracies:
        fits = [r["train_accuracy"] for r in series + controls]
        say(
            f"\nAccuracy of the models (5 classes): validation median {np.median(accuracies):.2f} "
            f"({min(accuracies):.2f}-{max(accuracies):.2f}), training median "
            f"{np.median(fits):.3f} (the models fit their patients and do not generalise)."
        )
    if series:
        ranks = [f"{np.median([r[a]['rank'] for r in series]):g} (`{a}`)" for a in ARMS]
        say(f"\nThe leaked name's median rank among the 50 roster names: {', '.join(ranks)}.")
        alarms = sorted({n for r in controls for a in ARMS for n in r[a]["flagged"]})
        if alarms:
            say(f"Names flagged by control scans: {', '.join(alarms)}.")
    if args.cached_only:
        say(f"\nRendered from the cached records (`--cached-only`), computed on {args.where}.")
    else:
        say(f"\nWall time of this invocation: {seconds / 60:.1f} min ({args.where}).")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=4, help="series models (and stamped ones)")
    parser.add_argument("--controls", type=int, default=4, help="models without any name")
    parser.add_argument("--position", type=int, nargs=2, default=[8, 8])
    parser.add_argument("--scale", type=int, default=4, help="glyph scale on the DICOM grid")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, required=True, help="cache folder (DICOMs, models)")
    parser.add_argument("--shard", default="0/1", help="K/N: every N-th model from K, no report")
    parser.add_argument("--cached-only", action="store_true")
    parser.add_argument("--where", default="2 shared cores, one thread per process")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    args = parser.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message=".*ImageOrientationPatient.*")  # no geometry tags
    start = time.perf_counter()
    args.work.mkdir(parents=True, exist_ok=True)
    setting = Setting(args.work, args.seed)
    probes = PipelineProbes.from_bundle(BUNDLE, setting.probe_files)
    records: dict[str, list] = {"series": [], "controls": []}
    counts = {"control": args.controls, "series": args.reps}
    jobs = [(k, rep) for rep in range(max(counts.values())) for k in counts if rep < counts[k]]
    for kind, rep in jobs[shard::shards]:
        bucket = "series" if kind == "series" else "controls"
        records[bucket].append(record := scanned(setting, args, probes, kind, rep))
        if record:
            found = [f"{a} rank {record[a]['rank']} {record[a]['flagged']}" for a in ARMS]
            log(f"{kind} {rep} {record.get('name') or ''}: {'; '.join(found)}")
    if shards == 1:
        report(args, setting, records, time.perf_counter() - start)
        if args.out:
            write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The leak scan's detection curve through a hospital's pipeline, by model input size.

Issue 65, item 2. ACDC slices written as 12-bit DICOM on their acquisition grids; the
project's CXR bundle, unchanged but for its ``image_size`` parameter (28, 64, 128, 224:
the model input), reads them (display values, scale to 0..1, area resize). A 4-letter
roster name is burned by ``canary inject`` (its library call, with the ``--bundle``
legibility check) at (8, 8), at the smallest 5x5 scale legible at that input (or the
largest that fits, planted with ``allow_illegible`` and marked so), into K training
slices of the commonest grid: 1 (one slice), 10 (one patient's series), 100 (slices of
one pathology group). The network (MLP-1, or a small CNN: CNN-1 with 16/32 padded
channels pooled after each convolution) learns the pathology group (5 classes) through
the bundle's preprocessing, 30 epochs. The scan, through the same bundle: the
product's default (class shift, name decoys, BH at 0.05 over the 50-name roster,
sequential decoys up to 1,998 per kind) and, on the same model with the same decoy
seed, the previous default of a fixed 1,000 decoys per kind, and the planted name checked
alone ("one name": ``memorisation scan --name``, alpha 0.05 with no roster to correct
over; on a control model, a roster name drawn as a planted one is). Control models train
on the same files without any name.

Detected = flagged and ranked first; 95 % Wilson intervals; "flagged when first" is the
issue's target rate (flagged among the trainings where the name ranks first; for "one
name", the rank is the roster scan's on the same model). Cost: texts
scored and seconds per scan, sequential over fixed.

The leak demo's path is a second data set (``digits:SIZE:NET:COPIES``): scikit-learn's
digits as 64x64 12-bit DICOM, its bundle with the model input at SIZE (64: no resize, the
issue's target cell), a name at (4, 4) in COPIES images of one digit class, MLP-1 early
stopped as the demo trains it, probes cut from pydicom's CT and MR images.

``--cells [DATA:]SIZE:NET:COPIES ...`` (DATA ``acdc``, the default, or ``digits``),
``--reps`` series models per cell, ``--controls`` control models per (data, size,
network); ``--shard K/N`` runs every N-th job (N processes at once),
``--cached-only`` renders from the records under ``--work``; ``--arms`` picks the scans
(``sequential`` alone skips the fixed-1,000 scan, whose cost is measured on the MLP-1
cells; a cached record gains the arms it lacks, on its cached model).

Usage::

    python benchmarks/leak_scan_detection_curve.py --cells 64:mlp-1:10 --reps 30 \\
        --controls 30 --work /tmp/curve --out benchmarks/results/leak_scan_detection_curve.md
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
from _acdc_dicom import DigitsSetting, Setting, sized_bundle
from _common import ROSTER, wilson
from _markdown import finish, log, say

from monai_forget.canary.legibility import smallest_legible
from monai_forget.dicom import as_options, inject_and_publish
from monai_forget.dicom.legible import LegibilityCheck
from monai_forget.io import atomic_write
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.pipeline import PipelineProbes
from monai_forget.memorisation.training import EarlyStoppingTraining
from monai_forget.unlearning.evaluation import accuracy

#: ACDC: epochs without early stopping (stopped on validation loss an MLP stops after one
#: epoch, below chance; at 30 it fits its training slices, the case a leak check is for).
EPOCHS = 30
NETWORKS = {
    "mlp-1": ("mlp-1", {}),
    "cnn": ("cnn-1", {"channels": (16, 32), "hidden": 128, "padding": 1, "pool_every": 1}),
}
#: The scans of each model: the roster scan (sequential decoys; always), the same with a
#: fixed 1,000 decoys per kind, and the planted name checked alone (``--name``; a control
#: model checks a roster name drawn as a planted one is) at the scan's alpha.
ARMS = ("sequential", "fixed 1000", "one name")
#: The arms the issue's targets are checked on, as the target lines name them.
TARGET_ARMS = {"sequential": "the roster scan", "one name": "the name checked alone"}


def recipe(setting, net: str, size: int) -> EarlyStoppingTraining:
    """ACDC: 30 epochs, the last kept; digits: the leak demo's early stopping."""
    name, extra = NETWORKS[net]
    args = {"in_shape": (1, size, size), "num_classes": setting.num_classes, **extra}
    if isinstance(setting, DigitsSetting):
        return EarlyStoppingTraining(name, args, max_epochs=60)
    return EarlyStoppingTraining(name, args, max_epochs=EPOCHS, patience=EPOCHS,
                                 restore_best=False)  # fmt: skip


def trained(setting, key: str, net: str, size: int, inputs, seed: int, device: str):
    """The model of ``key``, trained once and cached (state dict, weights only)."""
    path = setting.work / "models" / f"{key}.pt"
    how = recipe(setting, net, size)
    if path.is_file():
        model = how.build()
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval()
    if inputs is None:
        raise FileNotFoundError(f"{path}: a cached record's model is missing; delete the record")
    train, val = setting.split(inputs)
    model, _ = how.train(train, val, seed=seed, device=device)
    model = model.cpu().eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "wb") as handle:
        torch.save(model.state_dict(), handle)
    return model


def planted_scale(setting, size: int) -> int:
    """The smallest 5x5 scale whose capitals reach the legible height at this model input
    on the probes' grid, or the largest at which a 4-letter name fits there."""
    rows, cols = setting.probe_shape[-1], setting.probe_shape[-2]  # the file's grid
    hint = smallest_legible(size / max(rows, cols), (rows, cols), 4, setting.position)
    fits = (cols - setting.position[1]) // 23
    return int(min(hint.scale, fits))


def burned_inputs(setting, name: str, chosen: list[int], scale: int):
    """Model inputs with ``name`` burned by the injector into the ``chosen`` files (the
    legibility check on, illegible canaries allowed and recorded), and their legibility."""
    inputs = setting.inputs.copy()
    check = LegibilityCheck(setting.pre, allow_illegible=True)
    with tempfile.TemporaryDirectory(dir=setting.work) as tmp:
        source, burned = Path(tmp) / "series", Path(tmp) / "burned"
        source.mkdir()
        for i in chosen:
            shutil.copy2(setting.files[i], source / setting.files[i].name)
        options = as_options(text=name, position=setting.position, scale=scale)
        published = inject_and_publish(source, burned, options, manifest=Path(tmp) / "canary",
                                       all_files=True, workers=1, legibility=check)  # fmt: skip
        legible = [r.legibility for r in published.records if r.action == "injected"]
        for i in chosen:
            inputs[i] = setting.pre(setting.pre.load([burned / setting.files[i].name])[0])
    return inputs, legible


def scanned(model, probes, config: LeakScanConfig, name: str | None, names=ROSTER) -> dict:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = leak_scan(model, probes, list(names), config)
    row = {r.name: r for r in res.rows}
    return {
        "rank": res.rank_of(name) if name else None,
        "decision": row[name].decision if name else None,
        "flagged": res.significant_names(),
        "undecided": [r.name for r in res.rows if r.decision == "undecided"],
        "top": res.top.name,
        "texts": len(names) + sum(res.decoys_by_kind().values()),
        "seconds": time.perf_counter() - start,
    }


def record_path(work: Path, cell: tuple, rep: int) -> tuple[str, Path]:
    """A job's kind and its record, ``work/records/KIND_REP.json``."""
    data, size, net, copies = cell
    tag = "" if data == "acdc" else f"{data}_"
    kind = f"{tag}{size}_{net}_{copies}" if copies else f"{tag}{size}_{net}_control"
    return kind, work / "records" / f"{kind}_{rep}.json"


def job(setting, probes, args, cell: tuple, rep: int) -> dict | None:
    """One model and its scans, cached as JSON under ``work/records``; a cached record
    gains the ``--arms`` it lacks, scanned on its cached model."""
    data, size, net, copies = cell
    kind, path = record_path(setting.work, cell, rep)
    record = json.loads(path.read_text()) if path.is_file() else None
    if record and all(arm in record for arm in args.arms):
        return record
    stream = [args.seed, 65, size, copies, rep] + ([7] if data != "acdc" else [])
    rng = np.random.default_rng(stream)
    seed = args.seed + 1000 * copies + rep
    decoy_seed = int(np.random.SeedSequence(stream).generate_state(1)[0])
    scale = planted_scale(setting, size)
    # The planted name; a control model's one-name scan checks a name drawn the same way.
    name = str(rng.choice([n for n in ROSTER if len(n) == 4]))
    base = dict(position=setting.position, scale=scale, value="max", decoy_seed=decoy_seed,
                seed=rep, device=args.device)  # fmt: skip
    if record is None:
        record = {"data": data, "size": size, "network": net, "copies": copies, "scale": scale}
        inputs = setting.inputs
        if copies:
            carriers = setting.carriers(copies, rng, scale)
            inputs, legible = burned_inputs(setting, name, carriers, scale)
            record.update(
                name=name,
                legible=all(x["legible"] for x in legible),
                cap_height=float(np.median([x["legibility_cap_height"] for x in legible])),
                contrast=float(np.median([x["legibility_contrast"] for x in legible])),
            )
        model = trained(setting, kind + f"_{rep}", net, size, inputs, seed, args.device)
        record["sequential"] = scanned(model, probes, LeakScanConfig(**base), record.get("name"))
        record["train_accuracy"] = accuracy(model, setting.split(inputs)[0])
    else:
        model = trained(setting, kind + f"_{rep}", net, size, None, seed, args.device)
    if "fixed 1000" in args.arms and "fixed 1000" not in record:
        config = LeakScanConfig(**base, decoys=1000)
        record["fixed 1000"] = scanned(model, probes, config, record.get("name"))
    if "one name" in args.arms and "one name" not in record:
        record["one name"] = scanned(model, probes, LeakScanConfig(**base), name, names=[name])
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w", overwrite=path.is_file()) as handle:  # the same scans, and more
        json.dump(record, handle)
    return record


def ranked_first(record: dict, arm: str) -> bool:
    """Whether the planted name ranks first on the roster (a one-name scan has no roster:
    the rank is the roster scan's on the same model)."""
    return record["sequential" if arm == "one name" else arm]["rank"] == 1


def cell_rows(arm: str, series: list[dict], controls: list[dict]) -> str:
    first = [r for r in series if ranked_first(r, arm)]
    flagged = [r for r in series if r["name"] in r[arm]["flagged"]]
    found = [r for r in first if r["name"] in r[arm]["flagged"]]
    undecided = sum(r["name"] in r[arm]["undecided"] for r in series)
    alarms = sum(bool(r[arm]["flagged"]) for r in controls)
    cells = [wilson(len(found), len(series)), wilson(len(first), len(series)),
             wilson(len(flagged), len(series)), wilson(len(found), len(first)),
             f"{undecided}/{len(series)}", wilson(alarms, len(controls))]  # fmt: skip
    return " | ".join(cells)


def _mark(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def target_lines(series: list[dict], controls: list[dict], arm: str) -> list[str]:
    """The issue's targets on one cell (a 64-px model, a legible 10-image series)."""
    first = [r for r in series if ranked_first(r, arm)]
    found = sum(r["name"] in r[arm]["flagged"] for r in first)
    flagged = sum(r["name"] in r[arm]["flagged"] for r in series)
    alarms = sum(bool(r[arm]["flagged"]) for r in controls)
    upper = wilson_upper(alarms, len(controls))
    return [
        f"flagged when ranked first >= 80 %: {found}/{len(first)} "
        + _mark(bool(first) and found >= 0.8 * len(first)),
        f"flagged overall >= 60 %: {flagged}/{len(series)} " + _mark(flagged >= 0.6 * len(series)),
        f"controls <= 5 %, Wilson upper <= 0.1, >= 30 trainings: {alarms}/{len(controls)} "
        f"(upper {upper:.3f}) "
        + _mark(len(controls) >= 30 and alarms <= 0.05 * len(controls) and upper <= 0.1),
    ]


def wilson_upper(k: int, n: int) -> float:
    import scipy.stats

    return scipy.stats.binomtest(k, n).proportion_ci(0.95, method="wilson").high if n else 1.0


HEADER = (
    "| data | input px | network | copies | scale (median capital px at input; legible) "
    "| scan | detected | ranked first | flagged | flagged when first | name undecided "
    "| control scans flagging any name |"
)


def report(args, records: dict) -> list[str]:
    say("### The leak scan's detection curve by model input size and copies (issue 65)\n")
    intro = __doc__.split("\n\n")[1:3]
    say(f"`python benchmarks/leak_scan_detection_curve.py {' '.join(sys.argv[1:])}`. "
        + " ".join(x.replace("\n", " ") for x in intro) + "\n")  # fmt: skip
    say(HEADER)
    say("|---" * 12 + "|")
    targets = []
    for cell, series in sorted(records["series"].items()):
        series = [r for r in series if r]
        controls = [r for r in records["controls"].get(cell[:3], []) if r]
        if not series:
            continue
        legible = sum(r["legible"] for r in series)
        height = np.median([r["cap_height"] for r in series])
        place = f"{series[0]['scale']} ({height:.1f}; {legible}/{len(series)})"
        for arm in (a for a in ARMS if all(a in r for r in series + controls)):
            say(f"| {' | '.join(map(str, cell))} | {place} | {arm} | "
                f"{cell_rows(arm, series, controls)} |")  # fmt: skip
        if (cell[1], cell[3]) == (64, 10):  # the cell: the models with a legible name
            readable = [r for r in series if r["legible"]]
            for arm in (a for a in TARGET_ARMS if all(a in r for r in series + controls)):
                targets += [f"- {cell[0]}, 64 px, {NETWORKS[cell[2]][0].upper()}, a legible "
                            f"10-image series ({len(readable)} of {len(series)} models), "
                            f"{TARGET_ARMS[arm]}, {line}"
                            for line in target_lines(readable, controls, arm)]  # fmt: skip
    targets += cost_lines(records)
    say(f"\nComputed on {args.where}; rendered on {_commit()} ({time.strftime('%Y-%m-%d')}).")
    return targets


def cost_lines(records: dict) -> list[str]:
    """The cost table, sequential decoys over the fixed 1,000, on the models both scanned;
    its target line."""
    groups = [(k, v) for k, v in records["series"].items()]
    groups += [((*k, 0), v) for k, v in records["controls"].items()]
    groups = [(k, [r for r in v if r and "fixed 1000" in r]) for k, v in sorted(groups)]
    groups = [(k, v) for k, v in groups if v]
    if not groups:
        say("\nThe fixed-1,000 scan was not run on these models (`--arms sequential`); its "
            "cost against sequential decoys is measured in leak_scan_detection_curve.md and "
            "leak_scan_detection_curve_128.md.")  # fmt: skip
        return []
    say("\nCost of a scan, sequential decoys over the fixed 1,000 (the same models, rosters "
        "and decoy seeds):\n")  # fmt: skip
    say("| data | input px | network | models | texts scored: sequential / fixed (median) "
        "| ratio (median, max) | seconds: ratio (median) |")  # fmt: skip
    say("|---" * 7 + "|")
    ratios = []
    for key, group in groups:
        texts = np.array([r["sequential"]["texts"] / r["fixed 1000"]["texts"] for r in group])
        secs = np.array([r["sequential"]["seconds"] / r["fixed 1000"]["seconds"] for r in group])
        ratios.extend(texts)
        label = f"{key[3]} copies" if key[3] else "controls"
        seq = np.median([r["sequential"]["texts"] for r in group])
        fixed = np.median([r["fixed 1000"]["texts"] for r in group])
        say(f"| {key[0]} | {key[1]} | {key[2]} | {len(group)} ({label}) | {seq:.0f} / "
            f"{fixed:.0f} | {np.median(texts):.2f}, {texts.max():.2f} | "
            f"{np.median(secs):.2f} |")  # fmt: skip
    return [f"- sequential decoys cost <= 2x the fixed 1,000 (texts scored, every scan): max "
            f"{max(ratios):.2f}x " + _mark(max(ratios) <= 2)]  # fmt: skip


def _commit() -> str:
    import subprocess

    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=Path(__file__).parent)  # fmt: skip
    return f"commit {done.stdout.strip()}" if done.returncode == 0 else "an unknown commit"


def parse_cell(text: str) -> tuple:
    parts = text.split(":")
    data = parts.pop(0) if parts[0] in ("acdc", "digits") else "acdc"
    size, net, copies = int(parts[0]), parts[1], int(parts[2])
    return data, size, net, copies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cells", nargs="+", default=["64:mlp-1:10"],
                        help="[DATA:]SIZE:NET:COPIES")  # fmt: skip
    parser.add_argument("--reps", type=int, default=4, help="series models per cell")
    parser.add_argument("--controls", type=int, default=4, help="control models per setting")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--work", type=Path, required=True, help="cache folder (DICOMs, models)")
    parser.add_argument("--shard", default="0/1", help="K/N: every N-th job from K, no report")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS),
                        help="the scans run on each model (the sequential one always)")  # fmt: skip
    parser.add_argument("--cached-only", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the markdown here")
    parser.add_argument("--where", default="2 shared CPU cores, two shards of one thread each")
    args = parser.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    torch.set_num_threads(1 if args.device == "cpu" else torch.get_num_threads())
    warnings.filterwarnings("ignore", message=".*ImageOrientationPatient.*")
    args.work.mkdir(parents=True, exist_ok=True)
    cells = [parse_cell(c) for c in args.cells]
    jobs = [((*c[:3], 0), rep) for c in sorted({c[:3] for c in cells})
            for rep in range(args.controls)]  # fmt: skip
    jobs += [(c, rep) for c in cells for rep in range(args.reps)]
    jobs.sort(key=lambda j: (j[1], j[0]))  # replicate-major: every cell grows together
    records: dict = {"series": {}, "controls": {}}
    settings: dict = {}
    # By replicate: a cell's models and its controls spread evenly over the shards.
    for cell, rep in (j for j in jobs if j[1] % shards == shard):
        data, size = cell[:2]
        if args.cached_only:  # the records alone: no data, no training
            path = record_path(args.work, cell, rep)[1]
            record = json.loads(path.read_text()) if path.is_file() else None
        elif (data, size) not in settings:
            setting = (
                DigitsSetting(args.work, args.seed, size) if data == "digits"
                else Setting(args.work, args.seed, sized_bundle(args.work, size))
            )  # fmt: skip
            probes = PipelineProbes.from_bundle(setting.bundle, setting.probe_files)
            settings[data, size] = (setting, probes)
        if not args.cached_only:
            record = job(*settings[data, size], args, cell, rep)
        if cell[3]:
            records["series"].setdefault(cell, []).append(record)
        else:
            records["controls"].setdefault(cell[:3], []).append(record)
        if record:
            seq = record["sequential"]
            log(f"{' '.join(map(str, cell))} {rep} {record.get('name') or ''}: rank "
                f"{seq['rank']} flagged {seq['flagged']} texts {seq['texts']}/"
                f"{record.get('fixed 1000', {}).get('texts', '-')}")  # fmt: skip
    if shards == 1:
        return finish(report(args, records), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Leak scan through the model's preprocessing: a name burned on the acquisition grid.

Issue 54, targets 1 and 2. The images reach an MLP-1 as a pipeline delivers them: MNIST
digits on a ``--grid`` x ``--grid`` acquisition grid (bilinear upsampling of the 28x28
digits stands in for the scanner's grid), area-resized by MONAI's ``Resize`` to the
model's 28x28 input. A 4-letter roster name is burned with the injector's renderer
(5x5 typeface at ``--scale``, at ``--position``, the image's maximum as the value) into
K training images of one class (a patient's series) on the acquisition grid, so the
model sees it grey and blurred, as a hospital's model would. Control models are trained
on the same pipeline without any name.

Each model is scanned twice with the scan's defaults (50-name roster, name decoys, BH at
0.05):

- ``pipeline``: :class:`~monai_forget.memorisation.pipeline.PipelineProbes`: every text
  burned on the acquisition grid the same way, then area-resized (the issue's path);
- ``direct``: the documented direct stamp on the model grid (5x5 at (1, 1), value 1.0):
  what the scan measured before the issue, mis-specified for a pipeline;
- ``pipeline, class shift``: the pipeline scan ranking texts by the class shift
  (``--statistic class-shift``) instead of Eq. 1's M.

With ``--grid 28 --scale 1 --position 1 1`` the acquisition grid is the model's (the
resize is the identity): the ``pipeline`` rows are then the direct-stamp cell itself.

Detected = the leaked name flagged and ranked first; a control scan's false alarm = any
name flagged; 95 % Wilson intervals. The comparator is the direct-stamp cell measured
when the name is stamped on the model grid itself (26/100, ``leak_scan_series10_100.md``).

``--shard K/N`` computes every N-th model (N processes at once, then one with ``0/1``
reports from the cache); models and scans are cached under ``--cache``.

Usage::

    python benchmarks/leak_scan_pipeline_series.py --reps 100 --controls 100 \\
        --out benchmarks/results/leak_scan_pipeline_series.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from monai.transforms import Resize

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ufm_engine as ufm
from _common import scan_row
from _markdown import log, say, write

from monai_forget.canary import paint, render_text
from monai_forget.data import LabelledImages
from monai_forget.memorisation import LeakScanConfig, leak_scan
from monai_forget.memorisation.pipeline import PipelineProbes, Preprocessing

ARMS = ("pipeline", "direct", "pipeline, class shift")


def acquisition(images: np.ndarray, grid: int) -> np.ndarray:
    """28x28 images on the ``grid`` acquisition grid (bilinear upsampling)."""
    x = torch.from_numpy(np.asarray(images, dtype=np.float32))
    up = torch.nn.functional.interpolate(x, size=(grid, grid), mode="bilinear")
    return up.clamp(0.0, 1.0).numpy()


def preprocessing() -> Preprocessing:
    """The model's preprocessing: MONAI's area resize to 28x28."""
    return Preprocessing(Resize((28, 28), mode="area"), description="MONAI Resize area to 28x28")


def model_inputs(images: np.ndarray) -> np.ndarray:
    pre = preprocessing()
    return np.stack([pre(x) for x in images])


def series_data(args, series: int, rep: int):
    """Training and validation sets through the pipeline, ``series`` training images of
    one class carrying a 4-letter roster name burned on the acquisition grid."""
    split = ufm.STATE["splits"]["mnist"]
    rng = np.random.default_rng([ufm.STATE["seed"], 700, series, rep])
    name = str(rng.choice([n for n in ufm.ROSTER if len(n) == 4]))
    label = int(rng.integers(split.num_classes))
    chosen = rng.choice(np.flatnonzero(split.train.labels == label), series, replace=False)
    raw = acquisition(split.train.images, args.grid)
    for index in chosen if series else ():
        paint(raw[index], render_text(name, args.scale), args.position, float(raw[index].max()))
    train = LabelledImages(model_inputs(raw), split.train.labels, num_classes=10)
    val = LabelledImages(
        model_inputs(acquisition(split.val.images, args.grid)), split.val.labels, num_classes=10
    )
    return train, val, (name if series else None)


def model_for(args, series: int, rep: int):
    split = ufm.STATE["splits"]["mnist"]
    train, val, name = series_data(args, series, rep)
    arm = f"series{series}" if series else "control"
    key = f"pipeline/grid{args.grid}/{arm}/{rep}"
    pipeline_split = ufm.Split(train, val, split.probes, split.num_classes)
    model, _ = ufm.trained(key, "mlp-1", pipeline_split, train, ufm.STATE["seed"] + 500 + rep)
    return model, name


def scanned(args, series: int, rep: int) -> dict | None:
    """Both scans of one model (cached in the store)."""
    store, seed = ufm.STATE["store"], ufm.STATE["seed"]
    arm = f"series{series}" if series else "control"
    key = f"pipeline/grid{args.grid}/{arm}/{rep}/scans"
    record = store.get(key)
    if (record is not None and all(a in record for a in args.arms)) or args.cached_only:
        return record
    model, name = model_for(args, series, rep)
    probes = ufm.STATE["splits"]["mnist"].probes
    decoy_seed = int(np.random.SeedSequence([seed, 902, rep]).generate_state(1)[0])
    device = args.device
    record = record or {"name": name}
    through = PipelineProbes(acquisition(probes, args.grid), preprocessing())
    burned = dict(position=args.position, scale=args.scale, value="max")
    runs = {
        "pipeline": (through, burned),
        "direct": (through.clean(), {}),
        "pipeline, class shift": (through, {**burned, "statistic": "class-shift"}),
    }
    for arm_name, (scan_probes, where) in runs.items():
        if arm_name in record or arm_name not in args.arms:
            continue
        config = LeakScanConfig(decoy_seed=decoy_seed, seed=seed + rep, device=device, **where)
        start = time.perf_counter()
        res = leak_scan(model, scan_probes, ufm.ROSTER, config)
        record[arm_name] = {
            "rank": res.rank_of(name) if name else None,
            "flagged": res.significant_names(),
            "attributed": res.attributed_names(),
            "top": res.top.name,
            "seconds": time.perf_counter() - start,
        }
    record["shortcut"] = through.shortcut
    store.put(key, record)
    return record


def report(args, records: dict, seconds: float) -> None:
    say("### Leak scan through the model's preprocessing (issue 54)\n")
    say(
        f"`python benchmarks/leak_scan_pipeline_series.py --reps {args.reps} --controls "
        f"{args.controls} --series {args.series} --grid {args.grid} --scale {args.scale}`; "
        f"seed {ufm.STATE['seed']}; MLP-1 on 1000 MNIST digits upsampled to {args.grid}x"
        f"{args.grid} (the acquisition grid) and area-resized to 28x28 by MONAI's Resize; a "
        f"4-letter roster name burned by the injector's renderer at scale {args.scale}, "
        f"position {tuple(args.position)}, the image's maximum, into {args.series} training "
        "images of one class; 50-name roster, name decoys, BH at 0.05; 500 PneumoniaMNIST "
        "probes on the same acquisition grid.\n"
    )
    say("| scan | models | detected (flagged, ranked first) | ranked first | flagged | "
        "another roster name flagged | control scans flagging any name |")  # fmt: skip
    say("|---|---|---|---|---|---|---|")
    for arm in args.arms:
        series = [r for r in records["series"] if r is not None and arm in r]
        controls = [r for r in records["controls"] if r is not None and arm in r]
        say(scan_row(arm, series, controls))
    series = [r for r in records["series"] if r is not None]
    if len(series) > 1:
        import scipy.stats

        for arm, other in (("pipeline", "direct"), ("pipeline, class shift", "pipeline")):
            if not {arm, other} <= set(args.arms):
                continue
            both = [r for r in series if arm in r and other in r]
            a = np.array([r[arm]["rank"] for r in both])
            b = np.array([r[other]["rank"] for r in both])
            test = scipy.stats.wilcoxon(a, b) if (a != b).any() else None
            say(
                f"\nThe leaked name's rank among the 50 roster names, paired by model: median "
                f"{np.median(a):g} by `{arm}`, {np.median(b):g} by `{other}`; `{arm}` ranks it "
                f"better in {(a < b).sum()} of {len(both)} models, worse in {(a > b).sum()}"
                + (f" (Wilcoxon signed-rank p = {test.pvalue:.3g})." if test else ".")
            )
    say(
        "\nComparator: the direct-stamp cell with the name stamped on the model grid itself "
        "(`leak_scan_series10_100.md`, names): detected 26/100 (18.4-35.4 %), another "
        "roster name flagged 4/100, control scans flagging any name 0/100."
    )
    say(f"\nWall time of this invocation: {seconds / 60:.1f} min ({args.where}).")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ufm.add_scan_options(parser)
    parser.add_argument("--reps", type=int, default=12, help="models with the name")
    parser.add_argument("--controls", type=int, default=12, help="models without any name")
    parser.add_argument("--series", type=int, default=10, help="images carrying the name")
    parser.add_argument("--grid", type=int, default=64, help="acquisition grid (pixels)")
    parser.add_argument("--scale", type=int, default=2, help="glyph scale on that grid")
    parser.add_argument("--position", type=int, nargs=2, default=[2, 2])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS),
                        help="the scans to run and report (default: all)")  # fmt: skip
    parser.add_argument("--shard", default="0/1", help="K/N: every N-th model from K, no report")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cached-only", action="store_true")
    parser.add_argument("--where", default="2 shared cores, one thread per process")
    parser.add_argument("--records", type=Path, help="also write every scan record (JSON)")
    args = parser.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    torch.set_num_threads(1)
    start = time.perf_counter()
    ufm.init_cached(args)
    ufm.STATE.update(device=args.device)
    records: dict[str, list] = {"series": [], "controls": []}
    for rep in range(args.controls)[shard::shards]:
        records["controls"].append(record := scanned(args, 0, rep))
        if record:
            log(
                f"control {rep}: "
                + ", ".join(f"{a} {record[a]['flagged']}" for a in args.arms if a in record)
            )
    for rep in range(args.reps)[shard::shards]:
        records["series"].append(record := scanned(args, args.series, rep))
        if record:
            log(
                f"series {rep} {record['name']}: "
                + ", ".join(f"{a} rank {record[a]['rank']}" for a in args.arms if a in record)
            )
    if shards == 1:
        report(args, records, time.perf_counter() - start)
        if args.out:
            write(args.out)
        if args.records:
            args.records.write_text(json.dumps(records, indent=0, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

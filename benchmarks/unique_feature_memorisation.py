"""Unique-feature memorisation (Hartley & Tsaftaris 2022) on real data: detection, false
positives, leak scan and speed.

Data (from ``$MONAI_FORGET_DATA``, default ``../shared/data``; nothing is copied):

* MNIST: the official 10k test set, shuffled with the seed and split into a training
  subset and a validation subset (early stopping, M_w); probes for PneumoniaMNIST models
  come from the unused rest.
* PneumoniaMNIST: a training subset of the train split, a validation subset of the val
  split; its test split gives the out-of-distribution probes for MNIST models.

Experiments:

1. **Canary vs control models** per (data set, architecture MLP-1 / CNN-1 / CNN-2). A
   reference model is trained on the clean training subset, recording a checkpoint per
   epoch; TracInCP self-influence (Appendix A.5) ranks the training images, and the
   canaries are the top-k and bottom-k images. For each canary a model is trained with
   the unique feature (a 5x5 letter, 1 pixel from the top-left corner, white) injected
   into that one image; its control is trained with the same seed on the clean subset.
   Training: Adam, early stopping on the validation loss (Appendix A.2). Every model is
   scored with M (Eq. 1) and all four one-tailed tests (paper's random-patch controls),
   with the paired test again under random-letter controls, and with M_w (Sec. 2.2) on
   the validation images of the canary's class. Printed: detection rate (p < alpha) on
   canary models, false-positive rate on controls, mean M and M_w.
2. **Leak scan**: a 50-name roster; in each repetition one name is burned into one
   training image of an MLP-1 MNIST model (a random image, and separately one of the top
   TracIn self-influence images of a clean reference model); the scan ranks all names,
   with the paper's random-patch controls and with random-letter controls. Printed: how
   often the injected name ranks first and survives BH / Bonferroni correction; and how
   often a scan of a control model (same seed, no name) flags any name.
3. **Speed**: M over n probes vs one plain batched forward pass over the same probes.

Usage: ``python benchmarks/unique_feature_memorisation.py [--quick] [--seed 0]``
(progress on stderr; the report, in Markdown, on stdout).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import torch

from monai_forget.data import LabelledImages, data_root, load_mnist_test, load_pneumoniamnist
from monai_forget.inference import predict
from monai_forget.memorisation import (
    TESTS,
    CheckpointRecorder,
    EarlyStoppingTraining,
    UniqueFeature,
    inject_feature,
    leak_scan,
    memorisation_score,
    self_influence,
    white_box_score,
)

#: 50 candidate names of at most 4 letters (a 4-letter name is 23 px wide: it fits 28x28).
ROSTER = [
    "ADA",
    "ALI",
    "AMY",
    "ANNA",
    "BEA",
    "BEN",
    "BOB",
    "CARL",
    "DAN",
    "DORA",
    "EDDY",
    "EMMA",
    "EVA",
    "EVE",
    "FAY",
    "GUS",
    "HUGO",
    "IAN",
    "IDA",
    "IVY",
    "JACK",
    "JAN",
    "JOE",
    "JOHN",
    "KAI",
    "KATE",
    "KIM",
    "LEO",
    "LILY",
    "LUCY",
    "MAX",
    "MARY",
    "MIA",
    "NED",
    "NINA",
    "OLGA",
    "OTTO",
    "PAM",
    "PAUL",
    "RAY",
    "ROSA",
    "RUTH",
    "SAM",
    "SARA",
    "TED",
    "TINA",
    "TOM",
    "UMA",
    "VERA",
    "ZOE",
]
assert len(ROSTER) == 50 and len(set(ROSTER)) == 50

ARCHS = ("mlp-1", "cnn-1", "cnn-2")


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Config:
    n_train: int
    n_val: int
    n_probes: int
    top_k: int
    archs: tuple[str, ...]
    datasets: tuple[str, ...]
    scan_reps: int
    speed_probes: int
    max_epochs: int = 30
    patience: int = 3
    alpha: float = 0.05
    letter: str = "A"


FULL = Config(1000, 500, 500, 10, ARCHS, ("mnist", "pneumoniamnist"), 10, 2000)
QUICK = Config(500, 300, 300, 2, ("mlp-1", "cnn-1"), ("mnist",), 3, 2000)


def network_args(arch: str, num_classes: int) -> dict:
    base = {"in_shape": (1, 28, 28), "num_classes": num_classes}
    if arch == "mlp-1":
        return {**base, "hidden": 256}
    return {**base, "channels": (8, 16), "hidden": 64}


@dataclass
class Split:
    train: LabelledImages
    val: LabelledImages
    probes: np.ndarray  # out-of-distribution probes for models of this data set
    num_classes: int


def load_splits(cfg: Config, seed: int) -> dict[str, Split]:
    root = data_root()
    mnist = load_mnist_test(root)
    order = np.random.default_rng(seed).permutation(len(mnist))
    m_train = mnist.subset(order[: cfg.n_train])
    m_val = mnist.subset(order[cfg.n_train : cfg.n_train + cfg.n_val])
    m_rest = mnist.subset(order[cfg.n_train + cfg.n_val :])
    p_train_all = load_pneumoniamnist("train", root)
    p_val_all = load_pneumoniamnist("val", root)
    p_test = load_pneumoniamnist("test", root)
    rng = np.random.default_rng(seed + 1)
    p_train = p_train_all.subset(rng.permutation(len(p_train_all))[: cfg.n_train])
    p_val = p_val_all.subset(rng.permutation(len(p_val_all))[: min(cfg.n_val, len(p_val_all))])
    return {
        "mnist": Split(m_train, m_val, np.array(p_test.images[: cfg.n_probes]), 10),
        "pneumoniamnist": Split(p_train, p_val, np.array(m_rest.images[: cfg.n_probes]), 2),
    }


@dataclass
class ModelScore:
    kind: str  # "canary" or "control"
    influence: str  # "high" / "low" (TracIn rank of the canary image)
    index: int
    label: int
    m: float
    pvalues: dict[str, float]
    m_text: float
    p_text_paired: float
    m_w: float
    val_accuracy: float
    epochs: int


@dataclass
class ArchResult:
    dataset: str
    arch: str
    scores: list[ModelScore] = field(default_factory=list)
    seconds: float = 0.0
    influence_range: tuple[float, float, float, float] = (0, 0, 0, 0)


def accuracy(model: torch.nn.Module, data: LabelledImages) -> float:
    probs = predict(model, data).probs
    return float((probs.argmax(1) == data.labels).mean())


def score_model(model, split: Split, feature: UniqueFeature, label: int, seed: int) -> dict:
    s = memorisation_score(model, split.probes, feature, seed=seed)
    t = memorisation_score(
        model, split.probes, feature, seed=seed, random_feature="text", tests=("paired",)
    )
    w = white_box_score(model, split.val, feature, label, seed=seed)
    return {
        "m": s.m,
        "pvalues": {k: v.pvalue for k, v in s.tests.items()},
        "m_text": t.m,
        "p_text_paired": t.tests["paired"].pvalue,
        "m_w": w.m_w,
    }


def run_arch(cfg: Config, split: Split, dataset: str, arch: str, seed: int) -> ArchResult:
    start = time.perf_counter()
    result = ArchResult(dataset, arch)
    training = EarlyStoppingTraining(
        arch,
        network_args(arch, split.num_classes),
        max_epochs=cfg.max_epochs,
        patience=cfg.patience,
    )
    feature = UniqueFeature.from_text(cfg.letter, (1, 1), 1, 1.0)
    # 1. Reference model with per-epoch checkpoints -> TracInCP self-influence.
    recorder = CheckpointRecorder()
    reference, _ = training.train(split.train, split.val, seed=seed + 1000, handlers=[recorder])
    influence = self_influence(reference, recorder.checkpoints, split.train, batch_size=250)
    order = np.argsort(influence)
    picks = [("high", int(i)) for i in order[::-1][: cfg.top_k]]
    picks += [("low", int(i)) for i in order[: cfg.top_k]]
    result.influence_range = (
        float(influence[order[-1]]),
        float(influence[order[-cfg.top_k]]),
        float(influence[order[cfg.top_k - 1]]),
        float(influence[order[0]]),
    )
    log(f"[{dataset}/{arch}] TracIn over {len(recorder.checkpoints)} checkpoints done")
    # 2. One canary model per pick, one control with the same seed.
    for k, (level, index) in enumerate(picks):
        model_seed = seed + k
        label = int(split.train.labels[index])
        for kind, data in (
            ("canary", inject_feature(split.train, index, feature)),
            ("control", split.train),
        ):
            model, tlog = training.train(data, split.val, seed=model_seed)
            sc = score_model(model, split, feature, label, seed=seed + 7)
            result.scores.append(
                ModelScore(
                    kind,
                    level,
                    index,
                    label,
                    **sc,
                    val_accuracy=accuracy(model, split.val),
                    epochs=tlog.epochs_run,
                )
            )
        log(
            f"[{dataset}/{arch}] canary {k + 1}/{len(picks)} ({level} influence, image "
            f"{index}, class {label}): M canary {result.scores[-2].m:.3g} "
            f"p {result.scores[-2].pvalues['student']:.2g}; control {result.scores[-1].m:.3g} "
            f"p {result.scores[-1].pvalues['student']:.2g}"
        )
    result.seconds = time.perf_counter() - start
    return result


def rate(flags: list[bool]) -> str:
    return f"{sum(flags)}/{len(flags)} ({100 * np.mean(flags):.0f}%)" if flags else "-"


def print_arch_tables(results: list[ArchResult], alpha: float) -> None:
    print("\n### Detection (canary models) and false positives (control models)\n")
    print(
        f"p < {alpha}, one-tailed. `student` is the paper's test. Controls: the same "
        "design and seed without the feature; any detection there is a false positive.\n"
    )
    header = "| data | arch | test | controls | detected on canaries | high infl. | low infl. "
    print(header + "| false positives on controls |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        can = [s for s in r.scores if s.kind == "canary"]
        ctl = [s for s in r.scores if s.kind == "control"]
        rows = [(t, "patch", lambda s, t=t: s.pvalues[t]) for t in TESTS]
        rows.append(("paired", "letters", lambda s: s.p_text_paired))
        for test, control, get in rows:
            hi = [get(s) < alpha for s in can if s.influence == "high"]
            lo = [get(s) < alpha for s in can if s.influence == "low"]
            print(
                f"| {r.dataset} | {r.arch} | {test} | {control} | "
                f"{rate([get(s) < alpha for s in can])} | {rate(hi)} | {rate(lo)} | "
                f"{rate([get(s) < alpha for s in ctl])} |"
            )
        # Ours: M calibrated on the control models (black-box M of the same design trained
        # without the feature). A canary counts when its M exceeds every control's M; a
        # control counts (leave-one-out) when its M exceeds every other control's M.
        top = max(s.m for s in ctl)
        hi = [s.m > top for s in can if s.influence == "high"]
        lo = [s.m > top for s in can if s.influence == "low"]
        loo = [s.m > max(o.m for o in ctl if o is not s) for s in ctl]
        print(
            f"| {r.dataset} | {r.arch} | M > every control's M (ours) | patch | "
            f"{rate([s.m > top for s in can])} | {rate(hi)} | {rate(lo)} | {rate(loo)} |"
        )
    print("\n### Scores\n")
    print(
        "| data | arch | mean M canary | mean M control | mean M (letters) canary | "
        "mean M (letters) control | mean M_w canary | mean M_w control | val acc | "
        "epochs | TracIn top / k-th / k-th lowest / lowest | minutes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        can = [s for s in r.scores if s.kind == "canary"]
        ctl = [s for s in r.scores if s.kind == "control"]

        def mean(xs, attr):
            return np.mean([getattr(x, attr) for x in xs])

        inf = " / ".join(f"{v:.3g}" for v in r.influence_range)
        print(
            f"| {r.dataset} | {r.arch} | {mean(can, 'm'):.4g} | {mean(ctl, 'm'):.4g} | "
            f"{mean(can, 'm_text'):.4g} | {mean(ctl, 'm_text'):.4g} | {mean(can, 'm_w'):.4g} | "
            f"{mean(ctl, 'm_w'):.4g} | {mean(ctl, 'val_accuracy'):.3f} | "
            f"{mean(can + ctl, 'epochs'):.1f} | {inf} | {r.seconds / 60:.1f} |"
        )


def run_leak_scan(cfg: Config, split: Split, seed: int) -> None:
    """Inject one roster name into one training image, scan the roster, and a control."""
    start = time.perf_counter()
    arch = "mlp-1"
    training = EarlyStoppingTraining(
        arch,
        network_args(arch, split.num_classes),
        max_epochs=cfg.max_epochs,
        patience=cfg.patience,
    )
    # Where the name lands: a random training image (the realistic case), or one of the
    # top self-influence images of a clean reference model (TracInCP, App. A.5).
    recorder = CheckpointRecorder()
    reference, _ = training.train(split.train, split.val, seed=seed + 300, handlers=[recorder])
    influence = self_influence(reference, recorder.checkpoints, split.train, batch_size=250)
    top_images = np.argsort(influence)[::-1][: cfg.scan_reps]
    rng = np.random.default_rng(seed + 500)
    placements = ("random image", "high-influence image")
    controls = ("patch", "text")
    stats = {
        (p, c): {"rank": [], "bh": [], "bonf": [], "others": []}
        for p in placements
        for c in controls
    }
    ctl_stats = {c: {"any": [], "tops": []} for c in controls}
    lines = []
    for rep in range(cfg.scan_reps):
        name = str(rng.choice(ROSTER))
        indices = {
            "random image": int(rng.integers(len(split.train))),
            "high-influence image": int(top_images[rep]),
        }
        feature = UniqueFeature.from_text(name, (1, 1), 1, 1.0)
        cells = []
        for placement, index in indices.items():
            data = inject_feature(split.train, index, feature)
            model, _ = training.train(data, split.val, seed=seed + 200 + rep)
            for control in controls:
                res = leak_scan(
                    model, split.probes, ROSTER, seed=seed + rep, random_feature=control
                )
                rank = res.rank_of(name)
                st = stats[(placement, control)]
                st["rank"].append(rank)
                st["bh"].append(name in res.significant_names())
                st["bonf"].append(len(ROSTER) * res.rows[rank - 1].pvalue < cfg.alpha)
                st["others"].append(len([n for n in res.significant_names() if n != name]))
                cells.append(f"{rank}{'*' if st['bh'][-1] else ''}")
        control_model, _ = training.train(split.train, split.val, seed=seed + 200 + rep)
        for control in controls:
            res = leak_scan(
                control_model, split.probes, ROSTER, seed=seed + rep, random_feature=control
            )
            ctl_stats[control]["any"].append(bool(res.significant_names()))
            ctl_stats[control]["tops"].append(res.top.name)
            cells.append(f"{len(res.significant_names())} (top {res.top.name})")
        lines.append(
            f"| {rep} | {name} | {indices['random image']} | "
            f"{indices['high-influence image']} | " + " | ".join(cells) + " |"
        )
        log(f"[leak scan] rep {rep}: {name}: ranks {cells}")
    print(
        f"\n### Leak scan ({arch} on MNIST, {len(ROSTER)}-name roster, one name burned into "
        f"one training image, {len(split.probes)} PneumoniaMNIST probes, student test, "
        f"{cfg.scan_reps} repetitions)\n"
    )
    print(
        "Rank of the injected name (1 = first; `*` = significant after Benjamini-Hochberg); "
        "control models: number of names flagged after BH and the top-ranked name.\n"
    )
    print(
        "| rep | injected | random image | high-infl. image | rank: random img, patch | "
        "random img, letters | high-infl. img, patch | high-infl. img, letters | "
        "control: flagged, patch | control: flagged, letters |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    print(
        "\n| placement | random controls | ranked first | median rank | survives BH | "
        "survives Bonferroni | other names flagged per scan (BH) |"
    )
    print("|---|---|---|---|---|---|---|")
    for (placement, control), st in stats.items():
        print(
            f"| {placement} | {control} | {rate([r == 1 for r in st['rank']])} | "
            f"{np.median(st['rank']):.1f} | {rate(st['bh'])} | {rate(st['bonf'])} | "
            f"{np.mean(st['others']):.2f} |"
        )
    print()
    for control, st in ctl_stats.items():
        tops = ", ".join(f"{n} x{c}" for n, c in Counter(st["tops"]).most_common(3))
        print(
            f"- control models (no name), {control} controls: at least one name flagged "
            f"(BH) in {rate(st['any'])} of scans; most frequent top names: {tops}"
        )
    print(f"- minutes: {(time.perf_counter() - start) / 60:.1f}")


def best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run_speed(cfg: Config, splits: dict[str, Split], seed: int) -> None:
    root = data_root()
    probes = load_pneumoniamnist("train", root).subset(np.arange(cfg.speed_probes))
    feature = UniqueFeature.from_text(cfg.letter, (1, 1), 1, 1.0)
    print(
        f"\n### Speed: M over {len(probes)} PneumoniaMNIST probes vs one forward pass "
        "(batch 256, best of 15, interleaved)\n"
    )
    print("| arch | one forward pass (s) | M, all 4 tests (s) | probes/s for M | ratio |")
    print("|---|---|---|---|---|")
    for arch in ("mlp-1", "cnn-1"):
        torch.manual_seed(seed)
        model = EarlyStoppingTraining(arch, network_args(arch, 10)).build().eval()
        plain, full = float("inf"), float("inf")
        for _ in range(15):  # interleaved, so background load hits both alike
            plain = min(plain, best_time(lambda m=model: predict(m, probes, batch_size=256), 1))
            full = min(full, best_time(lambda m=model: memorisation_score(m, probes, feature), 1))
        print(
            f"| {arch} | {plain:.3f} | {full:.3f} | {len(probes) / full:.0f} | "
            f"{full / plain:.2f}x |"
        )
    print("\nTarget: M costs about three batched forward passes (ratio <= 3.5x).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller, faster run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: robust on a shared CPU)"
    )
    parser.add_argument("--skip", nargs="*", default=(), choices=("canaries", "scan", "speed"))
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    import monai
    import scipy

    print("## Unique-feature memorisation benchmark (Hartley & Tsaftaris 2022)\n")
    print(
        f"- command: `python benchmarks/unique_feature_memorisation.py"
        f"{' --quick' if args.quick else ''} --seed {args.seed}`; data: `{data_root()}`"
    )
    print(
        f"- seeds: data split {args.seed} (MNIST) / {args.seed + 1} (PneumoniaMNIST); canary "
        f"k and its control train with seed {args.seed}+k; TracIn reference model "
        f"{args.seed}+1000; random controls {args.seed}+7; leak scan: names and images "
        f"{args.seed}+500, models {args.seed}+200+rep, reference {args.seed}+300"
    )
    print(
        f"- training subset {cfg.n_train}, validation {cfg.n_val}, probes {cfg.n_probes}; "
        f"Adam 1e-3, batch 64, early stopping on validation loss (patience {cfg.patience}, "
        f"max {cfg.max_epochs} epochs, best weights restored)"
    )
    print(
        f"- unique feature: the letter {cfg.letter!r} (5x5, monai-forget-5x5 typeface) at row 1, "
        "col 1, value 1.0; random controls: same-size patches with the same ink count "
        "(paper), and random letters (ours)"
    )
    print(
        f"- canaries: top {cfg.top_k} and bottom {cfg.top_k} TracInCP self-influence images "
        "per (data, arch); networks: MLP-1 hidden 256; CNN-1/CNN-2 channels (8, 16), "
        "hidden 64"
    )
    print(
        f"- torch {torch.__version__}, monai {monai.__version__}, scipy {scipy.__version__}, "
        f"python {platform.python_version()}, {torch.get_num_threads()} threads"
    )
    splits = load_splits(cfg, args.seed)
    if "canaries" not in args.skip:
        results = [
            run_arch(cfg, splits[d], d, a, args.seed) for d in cfg.datasets for a in cfg.archs
        ]
        print_arch_tables(results, cfg.alpha)
    if "scan" not in args.skip:
        run_leak_scan(cfg, splits["mnist"], args.seed)
    if "speed" not in args.skip:
        run_speed(cfg, splits, args.seed)
    print(f"\nTotal wall time: {(time.perf_counter() - start) / 60:.1f} min")


if __name__ == "__main__":
    main()

"""Unique-feature memorisation (Hartley & Tsaftaris 2022) on real data: the paper's test and
the decoy-calibrated test on canary and control models, the leak scan, speed and scale.

Data (from ``$MONAI_FORGET_DATA``, default ``../shared/data``; nothing is copied):

* MNIST: the official 10k test set, shuffled with the seed and split into a training
  subset and a validation subset (early stopping); probes for PneumoniaMNIST models
  come from the unused rest.
* PneumoniaMNIST: a training subset of the train split, a validation subset of the val
  split; its test split gives the out-of-distribution probes for MNIST models.

Reference setting (the paper's, App. A.2-A.5): MLP-1, CNN-1, CNN-2 as in App. A.3;
Adam 3e-4, batch 128 (512 for CNN-2), early stopping with patience 10 (up to 500
epochs), best validation weights kept; TracInCP over 10 evenly spaced checkpoints
covering 95 % of the fall in training loss; unique feature the letter A (5x5) one pixel
from the top-left corner; random controls: the feature's 5x5 block overwritten with
random pixels (p = 0.5); M_w over the training images of the canary's class.

Experiments:

1. ``grid``: per (data set, network), a clean reference model ranks the training images
   by TracInCP self-influence; canary models carry the letter on one of the top-k or
   bottom-k images; control models are trained without it (control k shares canary k's
   seed; more controls with further seeds). Every model is scored with M and the
   paper's t-test, the calibrated test (M ranked among the 25 other letters), the
   paper's test with equal-ink controls, and M_w.
2. ``scan``: MLP-1 on MNIST; a 50-name roster; in each repetition one name is burned into
   one training image (a top self-influence image, and a random image), and the roster
   scanned against fresh decoys (1000 per name length); control models (no name) are
   scanned the same way.
3. ``speed``: M over 2000 probes vs one forward pass, per network.
4. ``scale``: a 10,000-name roster with 1,000 decoys, MLP-1, 500 probes.

Per-model results are JSON records (keyed by data set, network, model kind, index and
seed) kept in the repository under ``results/unique_feature_memorisation/seed<N>``; trained
weights go to ``--cache``. A run skips every model whose record exists, so an interrupted
run resumes where it stopped, on any machine, and ``--report`` renders the tables from
whatever the records hold.

Usage: ``python benchmarks/unique_feature_memorisation.py [--quick] [--workers 2]
[--only grid scan speed scale] [--report] [--out FILE]`` (progress on stderr, the
report in Markdown on stdout).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import time
import warnings
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import scipy.stats
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROSTER
from _markdown import log, say, write
from _ufm_engine import (
    FULL,
    STATE,
    Config,
    Store,
    init_worker,
    interval,
    job_reference,
    scan_model,
    trained,
)

from monai_forget.data import data_root, load_pneumoniamnist
from monai_forget.memorisation import (
    EarlyStoppingTraining,
    LeakScanConfig,
    ProbeSettings,
    UniqueFeature,
    inject_feature,
    leak_scan,
    memorisation_score,
    reference_test,
    white_box_score,
)
from monai_forget.stats import benjamini_hochberg
from monai_forget.unlearning.evaluation import accuracy

ARCHS = ("mlp-1", "cnn-1", "cnn-2")


DATASETS = ("mnist", "pneumoniamnist")


#: Where a full run keeps its per-model records (in the repository: see :class:`Store`).
RECORDS = Path(__file__).resolve().parent / "results" / "unique_feature_memorisation"


QUICK = Config(300, 200, 100, 1, 2, 1, 1, 8, 2, scale_names=300, scale_decoys=100)


def job_model(data: str, arch: str, kind: str, k: int) -> str:
    """Canary k (letter on pick k) or control k (no letter): train and score."""
    store, seed = STATE["store"], STATE["seed"]
    key = f"model/{data}/{arch}/{kind}/{k}"
    if store.get(key) is not None:
        return key
    split, cfg = STATE["splits"][data], STATE["cfg"]
    picks = store.get(f"ref/{data}/{arch}")["picks"]
    level, index = picks[k % len(picks)]
    label = int(split.train.labels[index])
    feature = UniqueFeature.from_text(cfg.letter, (1, 1), 1, 1.0)
    train = inject_feature(split.train, index, feature) if kind == "canary" else split.train
    model, rec = trained(key, arch, split, train, seed + k)
    start, cpu = time.perf_counter(), time.process_time()
    controls = ProbeSettings(seed=seed + 7)
    s = memorisation_score(model, split.probes, feature, controls, decoys=25, decoy_seed=0)
    ink = memorisation_score(
        model, split.probes, feature, replace(controls, random_feature="ink"), tests=("student",)
    )
    class_y = split.train.subset(np.flatnonzero(split.train.labels == label))
    w = white_box_score(model, class_y, feature, label, seed=seed + 7)
    store.put(
        key,
        {
            **rec,
            "kind": kind,
            "level": level if kind == "canary" else "-",
            "index": index,
            "label": label,
            "m": s.m,
            "p": {t: r.pvalue for t, r in s.tests.items()},
            "calibrated_rank": s.calibrated.rank,
            "calibrated_p": s.calibrated.pvalue,
            "exposure": s.calibrated.exposure,
            "decoy_m": s.calibrated.decoy_statistics.tolist(),
            "m_ink": ink.m,
            "p_ink": ink.pvalue,
            "m_w": w.m_w,
            "p_m_w": w.test.pvalue,
            "val_accuracy": accuracy(model, split.val),
            "score_wall_s": time.perf_counter() - start,
            "score_cpu_s": time.process_time() - cpu,
        },
    )
    return key


def job_scan(placement: str, rep: int) -> str:
    """MLP-1 on MNIST with one roster name on one image (or none), scanned with decoys."""
    store, seed, cfg = STATE["store"], STATE["seed"], STATE["cfg"]
    key = f"scan/{placement}/{rep}"
    if store.get(key) is not None:
        return key
    split = STATE["splits"]["mnist"]
    model, rec, name, index = scan_model(placement, rep)
    decoy_seed = int(np.random.SeedSequence([seed, 900, len(placement), rep]).generate_state(1)[0])
    start, cpu = time.perf_counter(), time.process_time()
    config = LeakScanConfig(decoy_seed=decoy_seed, seed=seed + rep, alpha=cfg.alpha)
    res = leak_scan(model, split.probes, ROSTER, config)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    rows = {r.name: r for r in res.rows}
    paper_p = np.array([rows[n].test_pvalue for n in ROSTER])
    paper_flagged = [
        n for n, q in zip(ROSTER, benjamini_hochberg(paper_p), strict=True) if q < cfg.alpha
    ]
    paper_rank = None
    if name is not None:
        paper_rank = 1 + int(np.sum(paper_p < rows[name].test_pvalue))
    store.put(
        key,
        {
            **rec,
            "rep": rep,
            "name": name,
            "index": index,
            "decoy_seed": decoy_seed,
            "rank": res.rank_of(name) if name else None,
            "exposure": rows[name].exposure if name else None,
            "flagged_bh": res.significant_names(),
            "flagged_bonferroni": [
                r.name for r in res.rows if min(1.0, len(ROSTER) * r.pvalue) < cfg.alpha
            ],
            "top": res.top.name,
            "paper_flagged_bh": paper_flagged,
            "paper_rank": paper_rank,
            "scan_wall_s": wall,
            "scan_cpu_s": cpu,
            "p": {r.name: r.pvalue for r in res.rows},
            "paper_p": {r.name: r.test_pvalue for r in res.rows},
        },
    )
    return key


def run_job(job: tuple) -> tuple:
    start = time.perf_counter()
    try:
        key = {"ref": job_reference, "model": job_model, "scan": job_scan}[job[0]](*job[1:])
        return job, key, time.perf_counter() - start, None
    except Exception as err:  # report and go on: the records keep what finished
        return job, None, time.perf_counter() - start, f"{type(err).__name__}: {err}"


def run_jobs(jobs: list[tuple], workers: int, cfg: Config, seed: int, store: Store) -> None:
    if not jobs:
        return
    args = (cfg, seed, store)
    if workers <= 1:
        init_worker(*args)
        results = map(run_job, jobs)
    else:
        pool = mp.get_context("spawn").Pool(workers, init_worker, args)
        results = pool.imap_unordered(run_job, jobs)
    for done, (job, key, seconds, error) in enumerate(results, start=1):
        log(f"[{done}/{len(jobs)}] {job} {'FAILED ' + error if error else key} ({seconds:.0f} s)")
    if workers > 1:
        pool.close()
        pool.join()


def grid_jobs(
    cfg: Config, archs: tuple[str, ...] = ARCHS, datasets: tuple[str, ...] = DATASETS
) -> tuple[list, list, list]:
    refs = [("ref", d, a) for a in archs for d in datasets]
    scans = [("scan", p, r) for r in range(cfg.scan_reps) for p in ("top", "random")]
    scans += [("scan", "control", r) for r in range(cfg.scan_controls)]
    models = []
    for a in archs:  # cheapest network first, so results arrive early
        for d in datasets:
            for k in range(max(2 * cfg.top_k, cfg.n_controls)):
                if k < 2 * cfg.top_k:
                    models.append(("model", d, a, "canary", k))
                if k < cfg.n_controls:
                    models.append(("model", d, a, "control", k))
    return refs, scans, models


def rate(flags: list[bool]) -> str:
    if not flags:
        return "-"
    k, n = int(sum(flags)), len(flags)
    lo, hi = interval(k, n)
    return f"{k}/{n} ({100 * k / n:.0f}%; {100 * lo:.0f}-{100 * hi:.0f}%)"


def mark(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def share(flags: list[bool]) -> float:
    """The fraction of True flags; NaN when there are none yet."""
    return float(np.mean(flags)) if flags else np.nan


def false_alarm_mark(flags: list[bool], level: float = 0.05) -> str:
    """Met / missed for false-alarm flags over null draws against a rate of ``level``; a
    miss carries the one-sided exact binomial test of a true rate above ``level``, since a
    point estimate over a few dozen draws can exceed it by chance. "-" without draws."""
    if not flags:
        return "-"
    k, n = int(sum(flags)), len(flags)
    if k / n <= level:
        return mark(True)
    p = scipy.stats.binomtest(k, n, level, alternative="greater").pvalue
    return f"{mark(False)} (exact binomial test of a rate above {level:.0%}: p = {p:.2g})"


#: Reference models per audited model in the grid's reference test: the next controls.
REFERENCES = 8


def against_controls(record: dict, controls: list[dict]) -> float:
    """p of the reference test (:func:`reference_test`) for one model, its references
    the :data:`REFERENCES` control models after its index (cyclically), never itself:
    models trained by the same recipe without the letter, as a user would train them."""
    others = sorted((c for c in controls if c["i"] != record["i"]), key=lambda c: c["i"])
    if len(others) < REFERENCES:
        return float("nan")
    start = next((j for j, c in enumerate(others) if c["i"] > record["i"]), 0)
    refs = [others[(start + j) % len(others)]["m"] for j in range(REFERENCES)]
    return reference_test(record["m"], refs).pvalue


def report_grid(cfg: Config, store: Store) -> list[str]:
    """Detection / false-positive tables; returns the target lines."""
    alpha = cfg.alpha
    say("\n### Canary and control models\n")
    say(
        f"p < {alpha}, one-tailed; 95 % Clopper-Pearson intervals. *paper's test*: Student "
        "t-test of d_u against d_r with the paper's block-overwrite random patches; "
        "*calibrated*: M ranked among the 25 other letters (decoys), p = rank / 26 "
        "(smallest possible 0.038); *reference models* (ours, chosen on the MLP-1 cells "
        "before the CNN cells were scored): M against M of the 8 next control models "
        "(trained without the letter), one-sided Student prediction test; *paper's test, "
        "equal-ink controls*: the controls of the previous version. Canaries: the letter "
        "on one of the top-10 (high) or bottom-10 (low) TracInCP self-influence training "
        "images; controls: no letter (control k has canary k's seed).\n"
    )
    say("| data | network | test | canaries: high infl. | low infl. | controls (false positives) |")
    say("|---|---|---|---|---|---|")
    targets, scores = [], []
    for arch in ARCHS:
        for data in DATASETS:
            recs = [
                {**rec, "i": i}
                for k in ("canary", "control")
                for i in range(max(2 * cfg.top_k, cfg.n_controls))
                if (rec := store.get(f"model/{data}/{arch}/{k}/{i}")) is not None
            ]
            if not recs:
                continue
            can = [r for r in recs if r["kind"] == "canary"]
            ctl = [r for r in recs if r["kind"] == "control"]
            tests = {
                "paper's test": lambda r: r["p"]["student"],
                "calibrated (decoys)": lambda r: r["calibrated_p"],
                f"{REFERENCES} reference models (ours)": partial(against_controls, controls=ctl),
                "paper's test, equal-ink controls": lambda r: r["p_ink"],
                "paired t-test (ours)": lambda r: r["p"]["paired"],
            }
            fpr = {}
            for name, get in tests.items():
                # NaN: not enough controls yet to serve as references
                ps = [(r, p) for r in recs if not np.isnan(p := get(r))]
                hi = [p < alpha for r, p in ps if r["kind"] == "canary" and r["level"] == "high"]
                lo = [p < alpha for r, p in ps if r["kind"] == "canary" and r["level"] == "low"]
                fp = [p < alpha for r, p in ps if r["kind"] == "control"]
                fpr[name] = (fp, share(hi))
                say(f"| {data} | {arch} | {name} | {rate(hi)} | {rate(lo)} | {rate(fp)} |")
            scores.append((data, arch, can, ctl))
            cal_fp, cal_hi = fpr["calibrated (decoys)"]
            pap_fp, pap_hi = fpr["paper's test"]
            pap_fp = share(pap_fp)
            n_ctl = len(ctl)
            so_far = (
                f" (only {n_ctl} of {cfg.n_controls} controls so far)"
                if n_ctl < cfg.n_controls
                else ""
            )
            targets.append(
                f"- {data} {arch}: calibrated false-positive rate {share(cal_fp):.3f} over "
                f"{len(cal_fp)} controls <= 0.05: {false_alarm_mark(cal_fp)}" + so_far
            )
            ref_fp, ref_hi = fpr[f"{REFERENCES} reference models (ours)"]
            targets.append(
                f"- {data} {arch}, with {REFERENCES} reference models (ours): false-positive "
                f"rate {share(ref_fp):.3f} <= 0.05: {false_alarm_mark(ref_fp)}; high-influence "
                "canaries "
                f"detected {ref_hi:.2f} (paper's test {pap_hi:.2f}, its false positives "
                f"{pap_fp:.3f}){so_far}"
            )
            if pap_fp <= 0.05:
                targets.append(
                    f"- {data} {arch}: the paper's test is valid here (false positives "
                    f"{pap_fp:.3f}); calibrated detection of high-influence canaries "
                    f"{cal_hi:.2f} >= the paper's {pap_hi:.2f}: {mark(cal_hi >= pap_hi)}{so_far}"
                )
    say(
        "\n| data | network | mean M canary high / low / control | mean M_w canary / "
        "control (training images of class y) | M_w p < 0.05 canary / control | val acc "
        "| epochs (mean) | TracIn checkpoints (epochs) | training min / model |"
    )
    say("|---|---|---|---|---|---|---|---|---|")
    for data, arch, can, ctl in scores:

        def mean(rs, f):
            return np.mean([f(r) for r in rs]) if rs else np.nan

        ref = store.get(f"ref/{data}/{arch}") or {}
        hi = [r for r in can if r["level"] == "high"]
        lo = [r for r in can if r["level"] == "low"]
        say(
            f"| {data} | {arch} | {mean(hi, lambda r: r['m']):.4g} / "
            f"{mean(lo, lambda r: r['m']):.4g} / {mean(ctl, lambda r: r['m']):.4g} | "
            f"{mean(can, lambda r: r['m_w']):.4g} / {mean(ctl, lambda r: r['m_w']):.4g} | "
            f"{rate([r['p_m_w'] < alpha for r in can])} / "
            f"{rate([r['p_m_w'] < alpha for r in ctl])} | "
            f"{mean(ctl, lambda r: r['val_accuracy']):.3f} | "
            f"{mean(can + ctl, lambda r: r['epochs']):.1f} | "
            f"{ref.get('checkpoint_epochs')} | "
            f"{mean(can + ctl, lambda r: r['train_wall_s']) / 60:.1f} |"
        )
    # Where does the letter A stand among the 26 letters on control models?
    say(
        "\nRank of `A` among the 26 letters on the control models (1 = the letter moves the "
        "model most; exchangeable letters would give each rank 1/26 of the time):\n"
    )
    for data, arch, _, ctl in scores:
        ranks = Counter(r["calibrated_rank"] for r in ctl)
        say(f"- {data} {arch}: " + ", ".join(f"{k}: {v}" for k, v in sorted(ranks.items())))
    return targets


def report_scan(cfg: Config, store: Store) -> list[str]:
    recs = {
        p: [store.get(f"scan/{p}/{r}") for r in range(n)]
        for p, n in (
            ("top", cfg.scan_reps),
            ("random", cfg.scan_reps),
            ("control", cfg.scan_controls),
        )
    }
    recs = {p: [r for r in v if r is not None] for p, v in recs.items()}
    if not any(recs.values()):
        return []
    say(
        f"\n### Leak scan (MLP-1 on MNIST, {len(ROSTER)}-name roster, 1000 decoys per name "
        f"length drawn fresh per scan, {cfg.n_probes} PneumoniaMNIST probes, BH at "
        f"{cfg.alpha})\n"
    )
    say(
        "Rank of the injected name among the 50 (calibrated p, ties by M); `*` = flagged "
        "after BH. Paper's test: the rank by the Student t-test p.\n"
    )
    say(
        "| rep | name | top-influence image: rank (paper's test rank) | exposure | random "
        "image: rank (paper's) | exposure | flagged others (top / random) |"
    )
    say("|---|---|---|---|---|---|---|")
    by_rep = {p: {x["rep"]: x for x in v} for p, v in recs.items()}
    for i in range(cfg.scan_reps):
        t, r = by_rep["top"].get(i), by_rep["random"].get(i)
        if t is None and r is None:
            continue

        def cell(x):
            if x is None:
                return "-", "-", "-"
            star = "*" if x["name"] in x["flagged_bh"] else ""
            others = len([n for n in x["flagged_bh"] if n != x["name"]])
            return f"{x['rank']}{star} ({x['paper_rank']})", f"{x['exposure']:.1f}", others

        tc, rc = cell(t), cell(r)
        name = (t or r)["name"]
        say(f"| {i} | {name} | {tc[0]} | {tc[1]} | {rc[0]} | {rc[1]} | {tc[2]} / {rc[2]} |")
    say(
        "\n| scans | injected name ranked 1st | median rank | flagged (BH) | flagged "
        "(Bonferroni) | paper's test + BH: flagged |"
    )
    say("|---|---|---|---|---|---|")
    for p in ("top", "random"):
        v = recs[p]
        if v:
            say(
                f"| name on a {p}{'-influence' if p == 'top' else ''} image | "
                f"{rate([x['rank'] == 1 for x in v])} | {np.median([x['rank'] for x in v]):.1f} | "
                f"{rate([x['name'] in x['flagged_bh'] for x in v])} | "
                f"{rate([x['name'] in x['flagged_bonferroni'] for x in v])} | "
                f"{rate([x['name'] in x['paper_flagged_bh'] for x in v])} |"
            )
    ctl = recs["control"]
    if ctl:
        say(
            f"| control models (no name): any name flagged | - | - | "
            f"{rate([bool(x['flagged_bh']) for x in ctl])} | "
            f"{rate([bool(x['flagged_bonferroni']) for x in ctl])} | "
            f"{rate([bool(x['paper_flagged_bh']) for x in ctl])} |"
        )
        tops = Counter(x["top"] for x in ctl).most_common(3)
        say(
            f"\nControl scans: top-ranked names {', '.join(f'{n} x{c}' for n, c in tops)}; "
            f"names flagged (BH): {Counter(n for x in ctl for n in x['flagged_bh'])}."
        )
    seconds = np.mean([x["scan_wall_s"] for v in recs.values() for x in v])
    say(
        f"\nScan time per model: {seconds:.0f} s "
        f"wall (2050 texts x {cfg.n_probes} probes, one thread, shared machine)."
    )
    targets = []
    if ctl:
        flagged = [bool(x["flagged_bh"]) for x in ctl]
        targets.append(
            f"- leak scan: control scans with any name flagged {sum(flagged)}/{len(ctl)} "
            f"<= 5 %: {false_alarm_mark(flagged)}"
        )
    if recs["top"]:
        k = sum(x["rank"] == 1 for x in recs["top"])
        targets.append(
            f"- leak scan: injected name ranked first in {k}/{len(recs['top'])} "
            f"top-influence placements (target >= 8/10): "
            f"{mark(k >= 0.8 * cfg.scan_reps and len(recs['top']) >= cfg.scan_reps)}"
        )
    return targets


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def run_speed(cfg: Config, seed: int) -> list[str]:
    """M (3 passes, 4 tests) over n probes vs one forward pass, per network (issue 14)."""
    from monai_forget.inference import predict

    probes = load_pneumoniamnist("train", data_root()).subset(np.arange(cfg.speed_probes))
    feature = UniqueFeature.from_text(cfg.letter, (1, 1), 1, 1.0)
    say(
        f"\n### Speed: M over {len(probes)} probes vs one forward pass (batch 256, best of "
        f"9, interleaved, {torch.get_num_threads()} thread(s), load average "
        f"{os.getloadavg()[0]:.1f})\n"
    )
    say("| network | one forward pass (s) | M, all 4 tests (s) | ratio |")
    say("|---|---|---|---|")
    out = []
    for arch in ARCHS:
        torch.manual_seed(seed)
        model = EarlyStoppingTraining.paper(arch, {"in_shape": (1, 28, 28), "num_classes": 10})
        model = model.build().eval()
        plain = full = float("inf")
        for _ in range(9):  # interleaved, so background load hits both alike
            plain = min(plain, best_of(lambda m=model: predict(m, probes, batch_size=256), 1))
            full = min(full, best_of(lambda m=model: memorisation_score(m, probes, feature), 1))
        say(f"| {arch} | {plain:.3f} | {full:.3f} | {full / plain:.2f}x |")
        out.append(
            f"- M <= 3.5x one forward pass, {arch}: {full / plain:.2f}x: "
            f"{mark(full / plain <= 3.5)} (issue 14 owns this target)"
        )
    return out


def run_scale(cfg: Config, seed: int) -> list[str]:
    """A large roster: names of 4 capital letters (one kind), MLP-1, timed, with
    ``cfg.scale_decoys`` decoys and with the scan's defaults (name decoys: every name of
    the kind there is, since a roster this size asks for more than exist)."""
    rng = np.random.default_rng([seed, 77])
    names: dict[str, None] = {}
    while len(names) < cfg.scale_names:
        names.setdefault("".join(rng.choice(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), 4)))
    probes = load_pneumoniamnist("test", data_root()).images[: cfg.n_probes]
    torch.manual_seed(seed)
    model = EarlyStoppingTraining.paper("mlp-1", {"in_shape": (1, 28, 28), "num_classes": 10})
    model = model.build().eval()
    targets = []
    for decoys in (cfg.scale_decoys, None):
        start, cpu = time.perf_counter(), time.process_time()
        config = LeakScanConfig(decoys=decoys, decoy_seed=seed, batch_size=4096)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = leak_scan(model, probes, list(names), config)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        drawn = sum(len(n.texts) for n in res.nulls)
        texts = len(res.rows) + drawn
        what = f"{drawn} {config.decoy_source} decoys" + (
            f" (the default; {res.settings['decoys_per_kind']} asked)" if decoys is None else ""
        )
        say(
            f"\n### Scale: {len(res.rows)} names + {what}, MLP-1, "
            f"{len(probes)} probes, {torch.get_num_threads()} threads\n"
        )
        say(
            f"- wall {wall:.0f} s ({texts / wall:.0f} texts/s, {texts * len(probes) / wall:.0f} "
            f"images/s), CPU {cpu:.0f} s, load average {os.getloadavg()[0]:.1f}"
        )
        for warning in caught:
            say(f"- warned: {warning.message}")
        targets.append(
            f"- scale: {len(res.rows)} names + {what} in {wall:.0f} s < 300 s: {mark(wall < 300)}"
        )
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="processes (1 thread each)")
    parser.add_argument("--threads", type=int, default=1, help="threads for speed/scale")
    parser.add_argument(
        "--only",
        nargs="*",
        default=("grid", "scan", "speed", "scale"),
        choices=("grid", "scan", "speed", "scale"),
    )
    parser.add_argument("--archs", nargs="*", default=ARCHS, choices=ARCHS, help="grid cells")
    parser.add_argument(
        "--datasets", nargs="*", default=DATASETS, choices=DATASETS, help="grid cells"
    )
    parser.add_argument(
        "--report", action="store_true", help="render the tables from the records, no training"
    )
    parser.add_argument(
        "--records",
        help="per-model JSON records (default: benchmarks/results/unique_feature_memorisation/"
        "seed<N> for a full run, under --cache for --quick)",
    )
    parser.add_argument(
        "--cache",
        default=os.path.expanduser("~/.cache/monai_forget/unique_feature_memorisation"),
        help="model weights (retrained when absent)",
    )
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    run = Path("quick" if args.quick else "full") / f"seed{args.seed}"
    records = RECORDS / f"seed{args.seed}" if not args.quick else Path(args.cache) / run / "records"
    store = Store(Path(args.records) if args.records else records, Path(args.cache) / run)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    if not args.report and ({"grid", "scan"} & set(args.only)):
        refs, scans, models = grid_jobs(cfg, tuple(args.archs), tuple(args.datasets))
        if "scan" not in args.only:
            scans = []
        if "grid" not in args.only:
            refs, models = [("ref", "mnist", "mlp-1")], []
        # MLP-1 first (the leak scan needs its TracIn ranking), then everything that
        # needs only those, while the CNN references train; then the CNN models.
        mlp_refs = [r for r in refs if r[2] == "mlp-1"]
        mlp_models = [m for m in models if m[2] == "mlp-1"]
        run_jobs(mlp_refs, args.workers, cfg, args.seed, store)
        rest = [r for r in refs if r not in mlp_refs]
        run_jobs(scans + mlp_models + rest, args.workers, cfg, args.seed, store)
        run_jobs([m for m in models if m not in mlp_models], args.workers, cfg, args.seed, store)
    import monai

    say("## Unique-feature memorisation benchmark (Hartley & Tsaftaris 2022)\n")
    say(
        f"- command: `python benchmarks/unique_feature_memorisation.py"
        f"{' --quick' if args.quick else ''} --seed {args.seed} --workers {args.workers}`; "
        f"data: `{data_root()}`"
    )
    say(
        f"- data: MNIST test set split {cfg.n_train} training / {cfg.n_val} validation (seed "
        f"{args.seed}), PneumoniaMNIST {cfg.n_train} training (train split) / {cfg.n_val} "
        f"validation (val split); {cfg.n_probes} out-of-distribution probes (PneumoniaMNIST "
        "test images for MNIST models, unused MNIST test images for PneumoniaMNIST models)"
    )
    say(
        "- networks and training as the paper (App. A.2/A.3): MLP-1 512-256-128, CNN-1, "
        f"CNN-2; Adam 3e-4, batch 128 (CNN-2 512), patience {cfg.patience}, up to "
        f"{cfg.max_epochs} epochs, best validation weights; TracInCP over 10 evenly spaced "
        "checkpoints covering 95 % of the fall in training loss (App. A.5)"
    )
    say(
        f"- seeds: canary and control k train with seed {args.seed}+k, reference "
        f"{args.seed}+1000, random controls {args.seed}+7; leak scan: names and images "
        f"[{args.seed}, 500, rep], models {args.seed}+200+rep, decoy seeds recorded per scan"
    )
    say(
        f"- torch {torch.__version__}, monai {monai.__version__}, scipy {scipy.__version__}, "
        f"python {platform.python_version()}; {os.cpu_count()} cores shared with other jobs"
    )
    targets = []
    if "grid" in args.only:
        targets += report_grid(cfg, store)
    if "scan" in args.only:
        targets += report_scan(cfg, store)
    if "speed" in args.only and not args.report:
        targets += run_speed(cfg, args.seed)
    if "scale" in args.only and not args.report:
        targets += run_scale(cfg, args.seed)
    say("\n### Targets (as measured)\n")
    for line in targets:
        say(line)
    say(f"\nWall time of this invocation: {(time.perf_counter() - start) / 60:.1f} min")
    if args.out:
        write(args.out)


if __name__ == "__main__":
    main()

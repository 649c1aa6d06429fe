"""The reference-model auditor on a withdrawn site that looks different from the known
non-members, in both directions, beside the same-source cells of the same trainings.

Per data set and seed, the trainings of ``benchmarks/audit_calibration.py`` (source A:
the consortium's; source B: another site, which no known non-member comes from) and one
more target:

- *up*: ``other site, trained on it``: the second target trained on 1,000 (MNIST) or 300
  (PneumoniaMNIST) of B's images; a never-seen D_Q of B then scores *above* the known
  non-members (the target knows the site, the reference models do not): the risk is a
  false "not forgotten";
- *down*: ``other site, a few of its images trained on``: a third target trained on the
  same source-A set and only 100 of B's images; D_Q's remembered samples come from those
  100, its never-seen ones from the rest of B, which this target hardly knows and scores
  *below* the known non-members: the risk is a partly remembered D_Q certified
  "forgotten".

Which way each pool leans is measured, not assumed: the first table gives the membership
strength relative to the known members that a never-seen D_Q of each pool shows on
average (0 for a pool like the known non-members, 1 for one like the known members).
The decision rates are the product's (``audit_calibration.count_cells``: the calibrated
score, the permutation test, the strength's bound and the shift check), 100 seeded D_Q
draws per cell and training.

``--with-site``: the same draws audited as a user given D_Q's site's images is: online
reference models that trained on the site (``audit_calibration_online.py --site``'s, in
pairs on halves of sources A and B) alone, and both designs, the answer theirs where
they agree (the product's audit given the site's images); those rows are packaged.

Run (5 trainings per data set; the first two targets and the reference models come from
``audit_calibration.py``'s cache, the third target is cached beside them; about 45
minutes on 2 cores, a data set per process)::

    python benchmarks/audit_calibration_online.py --site --site-only --skip-offline-site \
        --cache-dir CACHE --out /tmp/online_site.md
    python benchmarks/audit_site_shift.py --with-site --cache-dir CACHE \
        --out benchmarks/results/audit_site_shift.md \
        --error-rates monai_forget/audit/measured_error_rates.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _markdown import log, say, say_section, write
from _refmodel_cells import (
    ALPHA,
    DATASETS,
    FEW,
    FEW_TRAINED,
    MARGINS,
    ONLINE_A,
    SHIFT_SHARES,
    SIZES,
    Audit,
    add_training_options,
    count_cells,
    error_rate_rows,
    few_training,
    package_error_rates,
    pooled,
    rate,
    run_training,
    training,
    wilson,
)

from monai_forget.audit import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN

UP = "other site, trained on it"


def shifted_cells(n_b: int) -> list[tuple[str, float, int]]:
    """The cells of both directions (the down direction's where source B's ``n_b``
    images fill them)."""
    up = [(UP, share, size) for share in SHIFT_SHARES for size in SIZES[:3]]
    down = [
        (FEW_TRAINED, share, size)
        for share in SHIFT_SHARES
        for size in SIZES
        if round(share * size) <= FEW and size - round(share * size) <= n_b - FEW
    ]
    return up + down


def few_cells(dataset: str, seed: int, args: argparse.Namespace) -> dict[str, dict]:
    """Decision counts of the down-direction cells for one training (cached)."""
    store = Path(args.cache_dir) / "cells" / f"{dataset}_{seed}_{args.draws}_few.json"
    if store.is_file():
        return json.loads(store.read_text())
    run = few_training(dataset, seed, Path(args.cache_dir), args.references)
    wanted = [c for c in shifted_cells(len(run["labels_b"])) if c[0] == FEW_TRAINED]
    counts = count_cells(run, wanted, seed, args.draws)
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(counts, indent=1))
    log(f"{dataset} seed {seed}: the down-direction cells done")
    return counts


def _load_run(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run audit_calibration_online.py --site first")
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def site_runs(dataset: str, seed: int, args: argparse.Namespace) -> dict[str, tuple]:
    """Per direction: (its offline run, its run with D_Q's site's images), the latter the
    same targets against ``audit_calibration_online.py --site``'s online reference models
    (pairs of halves of sources A and B, every D_Q among them)."""
    cache = Path(args.cache_dir)
    site = _load_run(cache / "outputs" / f"{dataset}_{seed}_{args.references}_online_site.npz")
    few = few_training(dataset, seed, cache, args.references)
    down_site = {**site, "b_train": few["b_train"]}
    for source in ("a", "b"):
        down_site[f"probs_{source}"] = site[f"probs_{source}"].copy()
        down_site[f"probs_{source}"][1] = few[f"probs_{source}"][1]
    return {
        UP: (training(dataset, seed, cache, args.references), site),
        FEW_TRAINED: (few, down_site),
    }


#: How a user given D_Q's site's images can audit: online reference models that
#: trained on the site alone, or both designs, the answer theirs where they agree.
SITE_ARMS = {"site": "online with the site", "both": "both designs"}


def site_cells(dataset: str, seed: int, args: argparse.Namespace, arm: str) -> dict[str, dict]:
    """Both directions' cells in ``arm`` (:data:`SITE_ARMS`) for one training (cached)."""
    store = Path(args.cache_dir) / "cells" / f"{dataset}_{seed}_{args.draws}_{arm}.json"
    if store.is_file():
        return json.loads(store.read_text())
    runs, counts = site_runs(dataset, seed, args), {}
    for source, (offline, with_site) in runs.items():
        wanted = [c for c in shifted_cells(len(offline["labels_b"])) if c[0] == source]
        if arm == "site":
            counts |= count_cells(with_site, wanted, seed, args.draws, ONLINE_A)
        else:
            counts |= count_cells(offline, wanted, seed, args.draws, joint=(with_site, ONLINE_A))
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text(json.dumps(counts, indent=1))
    log(f"{dataset} seed {seed}: the cells of the arm {SITE_ARMS[arm]!r} done")
    return counts


def expected_strength(audit: Audit, pool: str) -> float:
    """The membership strength relative to the known members that D_Q drawn from
    ``pool`` shows on average: (mean - non-members' mean) / (members' - non-members')
    of the calibrated membership values (what ``share_bound`` estimates)."""
    calibration = audit.calibration
    values = calibration(audit.pools[pool][0])
    low, high = calibration.nonmembers.mean(), calibration.members.mean()
    return float((values.mean() - low) / (high - low))


def directions(dataset: str, seeds: list[int], args: argparse.Namespace) -> None:
    """Which way each pool leans: its expected strength per training."""
    cache = Path(args.cache_dir)
    rows = {
        "same source, never seen (first target)": [],
        "other site, never seen, the target never saw the site": [],
        f"other site, never seen; the target trained on {UP.split(', ')[0]}'s other images": [],
        f"other site, never seen; the target trained on {FEW} of its images": [],
        f"other site, the {FEW} images that target trained on": [],
    }
    for seed in seeds:
        run = training(dataset, seed, cache, args.references)
        base = Audit.of(run, 0, seed)
        up = Audit.of(run, 1, seed)
        down = Audit.of(few_training(dataset, seed, cache, args.references), 1, seed)
        for values, (audit, pool) in zip(
            rows.values(),
            [
                (base, "never"),
                (base, "other_site"),
                (up, "other_site_unseen"),
                (down, "other_site_unseen"),
                (down, "other_site_trained"),
            ],
            strict=True,
        ):
            values.append(expected_strength(audit, pool))
    say("| pool D_Q is drawn from | expected membership strength, mean [min-max] |")
    say("|---|---|")
    for label, values in rows.items():
        v = np.array(values)
        say(f"| {label} | {v.mean():+.3f} [{v.min():+.3f}, {v.max():+.3f}] |")
    say()


def verdict(count: int, n: int) -> str:
    """Met, met within sampling error (not significantly above alpha), or missed."""
    low, high = wilson(count, n)
    if count / n <= ALPHA and high <= 0.1:
        return "**met**"
    return "**met within sampling error**" if low <= ALPHA and high <= 0.1 else "**missed**"


def report(
    dataset: str, cells: dict[int, dict], keys: list[tuple[str, float, int]], arm: str = ""
) -> list:
    """The decision table of ``keys``; returns the target lines (named ``arm`` when
    given, and then without the same-source power lines)."""
    name = DATASETS[dataset]
    say(
        "| D_Q source | share | \\|D_Q\\| | not forgotten | forgotten | inconclusive | "
        "forgotten @0.25 | forgotten @0.1 |"
    )
    say("|---|---|---|---|---|---|---|---|")
    for source, share, size in keys:
        key = f"{source}|{share}|{size}"
        cols = [rate(*pooled(cells, key, f"0.5|{d}")[:2])
                for d in (NOT_FORGOTTEN, FORGOTTEN, INCONCLUSIVE)]  # fmt: skip
        cols += [rate(*pooled(cells, key, f"{m}|{FORGOTTEN}")[:2]) for m in (0.25, 0.1)]
        shown = f"{source}, {arm}" if arm else source
        say(f"| {shown} | {share:g} | {size} | " + " | ".join(cols) + " |")
    say()
    lines = []
    for source in (UP, FEW_TRAINED):
        mine = [k for k in keys if k[0] == source]
        if not mine:
            continue
        label = f"{source}, {arm}" if arm else source
        wrong = [(f"{s}|{share}|{n}", m) for s, share, n in mine for m in MARGINS if share >= m]
        got = [(pooled(cells, k, f"{m}|{FORGOTTEN}")[:2], k, m) for k, m in wrong]
        (c, n), key, margin = max(got, key=lambda x: (x[0][0] / x[0][1], wilson(*x[0])[1]))
        widest = max(wilson(*g[0])[1] for g in got)
        lines.append(
            f'- {name}, {label}: false "forgotten" where the true share >= the margin, worst '
            f"{c / n:.3f} [{wilson(c, n)[0]:.3f}, {wilson(c, n)[1]:.3f}] ({key.split('|', 1)[1]}, "
            f"margin {margin:g}; widest Wilson upper bound {widest:.3f}): "
            + (verdict(c, n) if widest <= 0.1 else "**missed**")
        )
        nulls = [(pooled(cells, f"{s}|{share}|{n}", f"0.5|{NOT_FORGOTTEN}")[:2], n)
                 for s, share, n in mine if share == 0]  # fmt: skip
        (c, n), size = max(nulls, key=lambda x: x[0][0] / x[0][1])
        lines.append(
            f'- {name}, {label}: false "not forgotten" on never-seen D_Q, worst {c / n:.3f} '
            f"[{wilson(c, n)[0]:.3f}, {wilson(c, n)[1]:.3f}] (|D_Q| {size}): {verdict(c, n)}"
        )
    for share, size, decision, goal in ((1.0, 50, NOT_FORGOTTEN, 0.9), (0.0, 200, FORGOTTEN, 0.75)):
        if arm:
            break
        c, n, _ = pooled(cells, f"same|{share}|{size}", f"0.5|{decision}")
        lines.append(
            f'- {name}, same source, power: share {share:g} called "{decision}" at |D_Q| {size}: '
            f"{c / n:.3f} [{wilson(c, n)[0]:.3f}, {wilson(c, n)[1]:.3f}] (goal >= {goal:g}): "
            + ("**met**" if c / n >= goal else "**missed**")
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_training_options(parser, seeds=5)
    parser.add_argument("--error-rates", help="write the down direction's rows into this JSON")
    parser.add_argument(
        "--with-site",
        action="store_true",
        help="also the down direction as audited given the site's images (online reference "
        "models of audit_calibration_online.py --site)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    say("# The reference-model auditor on a withdrawn site that looks different")
    say()
    command = " ".join(sys.argv[1:] if argv is None else argv)
    say(
        f"`python benchmarks/audit_site_shift.py {command}`; {args.references} reference "
        f"models, alpha {ALPHA}, the product's offline decision (RMIA's score, the shift "
        f"check), {args.draws} draws per cell and training, permutation tests of 999 "
        "relabellings; rates pooled over the trainings with 95 % Wilson intervals."
    )
    say()
    lines, rows = [], []
    for dataset in args.datasets:
        name = DATASETS[dataset]
        base = {seed: run_training(dataset, seed, args) for seed in args.seeds}
        down = {seed: few_cells(dataset, seed, args) for seed in args.seeds}
        cells = {seed: {**base[seed], **down[seed]} for seed in args.seeds}
        n_b = len(
            training(dataset, args.seeds[0], Path(args.cache_dir), args.references)["labels_b"]
        )
        say(f"## {name}: {len(args.seeds)} trainings (seeds {', '.join(map(str, args.seeds))})")
        say()
        say("Which way each pool leans (RMIA's calibrated score under each target):")
        say()
        directions(dataset, args.seeds, args)
        say('Decision rates at margin 0.5 ("forgotten" at 0.25 and 0.1 in the last columns):')
        say()
        same = [("same", share, size) for share in SHIFT_SHARES for size in SIZES]
        lines += report(dataset, cells, same + shifted_cells(n_b))
        down_cells = [c for c in shifted_cells(n_b) if c[0] == FEW_TRAINED]
        rows += [r for cell in down_cells for r in error_rate_rows(name, down, cell)]
        if args.with_site:
            say(
                "The same draws audited by a user given D_Q's site's images (every other "
                "image of source B): *online with the site*: the reference models in pairs on "
                "halves of sources A and B, D_Q among them; *both designs*: that audit and "
                "the offline one above, the answer theirs where they agree (the product's "
                "audit given the site's images):"
            )
            say()
            shifted = shifted_cells(n_b)
            for arm, label in SITE_ARMS.items():
                arm_cells = {seed: site_cells(dataset, seed, args, arm) for seed in args.seeds}
                lines += report(dataset, arm_cells, shifted, label)
                if arm == "both":
                    rows += [{**r, "site": True} for cell in shifted
                             for r in error_rate_rows(name, arm_cells, cell)]  # fmt: skip
    say_section("Targets of issue 50", lines)
    if args.out:
        write(args.out)
    if args.error_rates:
        source = (
            f"benchmarks/audit_site_shift.py: {len(args.seeds)} trainings per data set, "
            f"{args.references} reference models"
        )
        package_error_rates(Path(args.error_rates), rows, "offline", source, key="site_shift")
    return 0


if __name__ == "__main__":
    sys.exit(main())

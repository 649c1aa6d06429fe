"""The embedded default: a withdrawal audit on scikit-learn's bundled digits.

A consortium of three providers (A, B, C) trains a classifier; provider C withdraws.
The auditor holds a calibration set from the same domain that shares no sample with
any provider (the target's known non-members), and knows the retained providers' data
(its known members). Three scenarios are audited with the reference-model auditor (the
product's default: a bound on D_Q's membership strength relative to the known members
and a three-way decision at the default margin) and with the papers' K-S and EMA:

1. the original model (trained on A + B + C), audited on C: should say "not forgotten";
2. the model retrained without C, audited on C: should say "forgotten";
3. that retrained model, audited on A (still a member): should say "not forgotten".
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

import numpy as np
import torch

from monai_forget.audit import (
    FORGOTTEN,
    INCONCLUSIVE,
    NOT_FORGOTTEN,
    AuditResult,
    EMAAuditor,
    KSAuditor,
    ReferenceModelAuditor,
)
from monai_forget.audit.report import write_report
from monai_forget.audit.result import share_text
from monai_forget.auditor_registry import auditor_kind, kind_of
from monai_forget.data import LabelledImages, concat, load_digits
from monai_forget.io import atomic_write, check_writable
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe
from monai_forget.shadow.trainer import torch_threads

# The consortium's training design ("the same design" the auditor is told about). A
# fixed step budget gives every model the same optimisation effort whatever its data
# size, so confidence differences reflect membership rather than training length.
DIGITS_RECIPE = SupervisedRecipe(
    network="mlp",
    network_args={"in_shape": (1, 8, 8), "num_classes": 10, "hidden": (256,)},
    steps=1500,
    batch_size=32,
    learning_rate=1e-3,
)


#: Reference models in the demo (4 keep it under a minute on 2 cores; 8+ give power).
DEMO_REFERENCES = 4
#: The digits models are small: one torch thread trains them fastest, and a busy machine
#: does not slow them by an order of magnitude (measured: 1-2 s against 9-13 s with
#: torch's default of 2 threads at load 5-6).
DEMO_THREADS = 1


@dataclass(frozen=True)
class DemoRow:
    """One audited scenario with the decision the ground truth calls for."""

    scenario: str
    expected: str
    result: AuditResult

    @property
    def correct(self) -> bool:
        return self.result.decision == self.expected

    @property
    def wrong(self) -> bool:
        """A decision against the ground truth ("inconclusive" is not wrong)."""
        return not self.correct and self.result.decision != INCONCLUSIVE


def digits_split(seed: int = 0) -> dict[str, LabelledImages]:
    """Digits split into the auditor's calibration set and providers A, B, C.

    The calibration set holds 40% of the samples, each provider 20%; seeded, stratified.
    """
    digits = load_digits()
    calibration, providers = digits.split(0.4, seed=seed)
    a, rest = providers.split(1 / 3, seed=seed)
    b, c = rest.split(0.5, seed=seed)
    return {"calibration": calibration, "A": a, "B": b, "C": c}


def run_demo(
    out_dir: str | Path = "monai-forget-demo",
    *,
    seed: int = 0,
    device: str = "cpu",
    overwrite: bool = False,
    progress: bool = True,
) -> list[DemoRow]:
    """Train the consortium's models, run both audits, write results and the report.

    Writes ``report.html``, one JSON per audit and :func:`write_inputs`'s files to
    ``out_dir``; existing files are refused unless ``overwrite``.
    """
    out_dir = Path(out_dir)
    report_path = check_writable(out_dir / "report.html", overwrite)
    for name in INPUT_FILES:  # refused now, not after minutes of training
        check_writable(out_dir / "inputs" / name, overwrite)
    sets = digits_split(seed)
    cache = out_dir / "cache"
    options = {"recipe": DIGITS_RECIPE, "seed": seed, "device": device, "cache_dir": cache}
    reference = ReferenceModelAuditor(**options, n_references=DEMO_REFERENCES, workers=1)
    auditors = [reference, KSAuditor(**options), EMAAuditor(**options)]
    steps = 2 + 3 * len(auditors)
    with torch_threads(DEMO_THREADS), _progress(steps, progress) as bar:
        trainer = ShadowTrainer(DIGITS_RECIPE, device=device, cache_dir=cache)
        bar.set_description("training the consortium's model on A + B + C")
        original = trainer.train(concat(sets["A"], sets["B"], sets["C"]), seed=seed)
        bar.update()
        bar.set_description("retraining it without C")
        retrained = trainer.train(concat(sets["A"], sets["B"]), seed=seed)
        bar.update()
        # (scenario, model, provider audited, right answer, retained providers: known members)
        scenarios = [
            ("original model, provider C", original, "C", NOT_FORGOTTEN, ("A", "B")),
            ("retrained without C, provider C", retrained, "C", FORGOTTEN, ("A", "B")),
            ("retrained without C, provider A", retrained, "A", NOT_FORGOTTEN, ("B",)),
        ]
        rows = []
        for name, model, provider, expected, retained in scenarios:
            for auditor in auditors:
                bar.set_description(f"{name}: {kind_of(auditor).title}")
                if auditor is reference:
                    known = (concat(*(sets[r] for r in retained)), sets["calibration"])
                    result = reference.audit(model, sets[provider], known, label=name)
                else:
                    result = auditor.audit(model, sets[provider], sets["calibration"], label=name)
                rows.append(DemoRow(name, expected, result))
                bar.update()
    write_inputs(out_dir / "inputs", sets, original, retrained, overwrite=overwrite)
    for i, row in enumerate(rows):
        row.result.save(out_dir / f"audit_{i:02d}_{row.result.method}.json", overwrite=overwrite)
    write_report(
        [r.result for r in rows], report_path, title="Digits withdrawal audit", overwrite=overwrite
    )
    return rows


#: What :func:`write_inputs` writes in ``<out>/inputs``.
INPUT_FILES = ("target.pt", "retrained.pt", "recipe.json", "provider_a.npz", "provider_b.npz",
               "provider_c.npz", "calibration.npz")  # fmt: skip


def write_inputs(
    folder: Path,
    sets: dict[str, LabelledImages],
    original: torch.nn.Module,
    retrained: torch.nn.Module,
    overwrite: bool = False,
) -> list[Path]:
    """The files the README's audit commands read, from the demo's own data and models:
    ``target.pt`` (the original model's state dict), ``retrained.pt`` (without C),
    ``provider_a/b/c.npz`` and ``calibration.npz`` (``images`` float32 (N, 1, 8, 8),
    ``labels`` int64 (N,): the auditor's calibration set, also its known non-members)
    and ``recipe.json`` (the consortium's training design, data only).
    """
    files: dict[str, Callable[[IO], None]] = {
        "target.pt": functools.partial(torch.save, original.state_dict()),
        "retrained.pt": functools.partial(torch.save, retrained.state_dict()),
        "recipe.json": lambda f: f.write(json.dumps(asdict(DIGITS_RECIPE), default=list).encode()),
    }
    for name, data in (("provider_a", "A"), ("provider_b", "B"), ("provider_c", "C"),
                       ("calibration", "calibration")):  # fmt: skip
        arrays = {"images": sets[data].images, "labels": sets[data].labels}
        files[f"{name}.npz"] = functools.partial(_savez, arrays=arrays)
    assert tuple(files) == INPUT_FILES
    paths = [check_writable(folder / name, overwrite) for name in files]
    for path, write in zip(paths, files.values(), strict=True):
        with atomic_write(path, "wb", overwrite=overwrite) as handle:
            write(handle)
    return paths


def _savez(handle: IO, arrays: dict) -> None:
    np.savez(handle, **arrays)


def _progress(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(
        total=total, disable=not enabled, bar_format="{l_bar}{bar}| {n}/{total} [{elapsed}]"
    )


def format_table(rows: list[DemoRow]) -> str:
    """The decisions as a markdown table."""
    lines = [
        "| scenario | method | statistic | membership strength vs known members (95 % upper "
        "bound) | decision | expected "
        "| right? |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        r = row.result
        bound = r.details.get("membership_strength_upper")
        remembered = f"at most {share_text(bound)}" if bound is not None else "-"
        lines.append(
            f"| {row.scenario} | {auditor_kind(r.method).title} | {r.statistic_name} = "
            f"{r.statistic:.3g} | {remembered} | {r.decision} | {row.expected} | "
            f"{'yes' if row.correct else ('NO' if row.wrong else 'no decision')} |"
        )
    return "\n".join(lines)

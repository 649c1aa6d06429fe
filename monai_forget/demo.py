"""The embedded default: a withdrawal audit on scikit-learn's bundled digits.

A consortium of three providers (A, B, C) trains a classifier; provider C withdraws.
The auditor holds a calibration set from the same domain that shares no sample with
any provider. Three scenarios are audited with both methods:

1. the original model (trained on A + B + C), audited on C: should say "not forgotten";
2. the model retrained without C, audited on C: should say "forgotten";
3. that retrained model, audited on A (still a member): should say "not forgotten".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from monai_forget.audit import FORGOTTEN, NOT_FORGOTTEN, AuditResult, EMAAuditor, KSAuditor
from monai_forget.audit.report import write_report
from monai_forget.data import LabelledImages, concat, load_digits
from monai_forget.io import check_writable
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

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


@dataclass(frozen=True)
class DemoRow:
    """One audited scenario with the decision the ground truth calls for."""

    scenario: str
    expected: str
    result: AuditResult

    @property
    def correct(self) -> bool:
        return self.result.decision == self.expected


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

    Writes ``report.html`` and one JSON per audit to ``out_dir``; existing files are
    refused unless ``overwrite``.
    """
    out_dir = Path(out_dir)
    report_path = check_writable(out_dir / "report.html", overwrite)
    sets = digits_split(seed)
    cache = out_dir / "cache"
    trainer = ShadowTrainer(DIGITS_RECIPE, device=device, cache_dir=cache)
    original = trainer.train(concat(sets["A"], sets["B"], sets["C"]), seed=seed)
    retrained = trainer.train(concat(sets["A"], sets["B"]), seed=seed)
    scenarios = [
        ("original model, provider C", original, "C", NOT_FORGOTTEN),
        ("retrained without C, provider C", retrained, "C", FORGOTTEN),
        ("retrained without C, provider A", retrained, "A", NOT_FORGOTTEN),
    ]
    options = {"recipe": DIGITS_RECIPE, "seed": seed, "device": device, "cache_dir": cache}
    auditors = [KSAuditor(**options), EMAAuditor(**options)]
    rows = []
    for name, model, provider, expected in _progress(scenarios, progress):
        for auditor in auditors:
            result = auditor.audit(model, sets[provider], sets["calibration"], label=name)
            rows.append(DemoRow(name, expected, result))
    for i, row in enumerate(rows):
        row.result.save(out_dir / f"audit_{i:02d}_{row.result.method}.json", overwrite=overwrite)
    write_report(
        [r.result for r in rows], report_path, title="Digits withdrawal audit", overwrite=overwrite
    )
    return rows


def _progress(items: list, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(items, desc="auditing scenarios", disable=not enabled)


def format_table(rows: list[DemoRow]) -> str:
    """The decisions as a markdown table."""
    lines = [
        "| scenario | method | statistic | decision | expected | right? |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        r = row.result
        lines.append(
            f"| {row.scenario} | {r.method.upper()} | {r.statistic_name} = {r.statistic:.3g} "
            f"| {r.decision} | {row.expected} | {'yes' if row.correct else 'NO'} |"
        )
    return "\n".join(lines)

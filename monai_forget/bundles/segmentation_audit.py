"""The withdrawal audit of one provider for the ACDC segmentation bundle (``audit.json``).

The auditors of :mod:`monai_forget.audit` run unchanged on per-image scores
(:class:`~monai_forget.segmentation.SegmentationScores`, through
:meth:`~monai_forget.segmentation.SegmentationScores.to_predictions`):

- K-S (Liu & Tsaftaris 2020, Alg. 1): a query shadow trained on D_Q and a calibration
  shadow trained on D_C by the bundle's own ``train.json``; rho_KS compares the
  distributions of the score on D_Q (Eq. 4);
- EMA (Huang, Li & Li 2021, Alg. 1-2): a reference model trained on half of D_C's
  patients; the score's threshold is learned between those members and the other
  half; the target's scores on D_Q give the membership vector and rho_EMA. EMA's
  ensemble here is the one score (``metrics=("confidence",)``): on the row
  ``(1 - s, s)`` the correctness rule would read ``s > 0.5``, which holds for almost
  every well-segmented image, member or not.

Images whose label has no structure (no foreground confidence) are left out for every
model alike; which images those are depends on the labels only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from monai_forget.audit import AuditReference, AuditResult, EMAReference, KSReference, write_report
from monai_forget.bundles.segmentation import SegmentationAuditSetup
from monai_forget.bundles.weights import check_outputs
from monai_forget.defaults import EMA_ALPHA
from monai_forget.results import jsonable, write_json
from monai_forget.segmentation import SCORE_NAMES, SegmentationScores

__all__ = ["SegmentationWithdrawalAudit"]

#: The sets each model is scored on.
_MODELS = {
    "target": "query",
    "query_shadow": "query",
    "calibration_shadow": "query",
    "ema_reference": ("members", "nonmembers"),
}


class SegmentationWithdrawalAudit:
    """K-S and EMA audits of one provider's slices for a segmentation bundle.

    Writes ``ks.json``, ``ema.json``, ``report.html``, ``reference.json`` (the
    evaluation-time references, as the classification bundles write them) and
    ``scores.json``: every model's per-image scores on its sets and rho_KS / rho_EMA for
    each of :data:`~monai_forget.segmentation.SCORE_NAMES` (the decision is the one of
    ``setup.score``).

    Args:
        setup: the audited model, loading, shadow training, scoring and outputs.
        query: D_Q entries (the provider's training slices).
        calibration_members: D_C entries the EMA reference model is trained on.
        calibration_nonmembers: the rest of D_C (held out from that model).
        alpha: EMA's significance level (rho_EMA <= alpha means forgotten).

    Raises:
        ValueError: D_Q and D_C share patients.
    """

    def __init__(
        self,
        setup: SegmentationAuditSetup,
        query: Sequence[Mapping[str, Any]],
        calibration_members: Sequence[Mapping[str, Any]],
        calibration_nonmembers: Sequence[Mapping[str, Any]],
        alpha: float = EMA_ALPHA,
    ) -> None:
        patients = {e["patient"] for e in query}
        overlap = patients & {e["patient"] for e in [*calibration_members, *calibration_nonmembers]}
        if overlap:
            raise ValueError(f"D_Q and D_C share patients {sorted(overlap)[:5]}; split by patient")
        self.setup = setup
        self.entries = {
            "query": list(query),
            "members": list(calibration_members),
            "nonmembers": list(calibration_nonmembers),
        }
        self.alpha = float(alpha)

    def outputs(self) -> list[Path]:
        names = ["ks.json", "ema.json", "report.html", "reference.json", "scores.json"]
        return [self.setup.output_dir / n for n in names]

    def _models(self) -> dict[str, nn.Module]:
        calibration = self.entries["members"] + self.entries["nonmembers"]
        setup = self.setup
        return {
            "target": setup.load(),
            "query_shadow": setup.train(self.entries["query"], "query shadow (D_Q)"),
            "calibration_shadow": setup.train(calibration, "calibration shadow (D_C)"),
            "ema_reference": setup.train(self.entries["members"], "EMA reference"),
        }

    def score_all(self) -> dict[str, SegmentationScores]:
        """Every model's per-image scores on the sets it is audited on."""
        data = {k: self.setup.slices(v) for k, v in self.entries.items()}
        scores = {}
        for name, model in self._models().items():
            sets = _MODELS[name] if isinstance(_MODELS[name], tuple) else (_MODELS[name],)
            for part in sets:
                scores[f"{name}/{part}"] = self.setup.scores(model, data[part])
        return scores

    def audit_score(
        self, scores: Mapping[str, SegmentationScores], score: str, label: str = ""
    ) -> tuple[AuditResult, AuditResult, KSReference, EMAReference]:
        """K-S and EMA decisions from per-image ``score``."""
        q = scores["target/query"].defined(score)
        members, nonmembers = scores["ema_reference/members"], scores["ema_reference/nonmembers"]
        ks_ref = KSReference.from_predictions(
            scores["query_shadow/query"].to_predictions(score, q),
            scores["calibration_shadow/query"].to_predictions(score, q),
        )
        ema_ref = EMAReference.from_predictions(
            members.to_predictions(score, members.defined(score)),
            nonmembers.to_predictions(score, nonmembers.defined(score)),
            metrics=("confidence",),
            alpha=self.alpha,
        )
        target = scores["target/query"].to_predictions(score, q)
        return (
            ks_ref.audit(target, label=label),
            ema_ref.audit(target, label=label),
            ks_ref,
            ema_ref,
        )

    def run(self) -> dict[str, AuditResult]:
        """Train (or reuse) the shadows, score every model, audit, write the outputs."""
        setup = self.setup
        check_outputs(*self.outputs(), overwrite=setup.overwrite)
        label = setup.label
        scores = self.score_all()
        table = {}
        for name in SCORE_NAMES:
            ks, ema, _, _ = self.audit_score(scores, name, label)
            table[name] = {
                "rho_KS": ks.statistic,
                "rho_EMA": ema.statistic,
                "ks": ks.decision,
                "ema": ema.decision,
            }
        ks, ema, ks_ref, ema_ref = self.audit_score(scores, setup.score, label)
        sizes = {k: len(v) for k, v in self.entries.items()}
        patients = {k: len({e["patient"] for e in v}) for k, v in self.entries.items()}
        ks, ema = (
            result.adding(
                sizes={f"{k}_slices": n for k, n in sizes.items()},
                details={"score": setup.score, "patients": patients},
            )
            for result in (ks, ema)
        )
        for result in (ks, ema):
            result.save(setup.output_dir / f"{result.method}.json", overwrite=setup.overwrite)
            print(result.summary())
        write_report(
            [ks, ema],
            setup.output_dir / "report.html",
            title=f"Segmentation withdrawal audit: provider {setup.provider}",
            overwrite=setup.overwrite,
        )
        query = scores["target/query"]
        reference = AuditReference(
            provider=setup.provider,
            query_size=int(query.defined(setup.score).sum()),
            num_classes=2,
            ks=ks_ref,
            ema=ema_ref,
            audited={"ks": ks.statistic, "ema": ema.statistic},
        )
        reference.save(setup.output_dir / "reference.json", overwrite=setup.overwrite)
        record = {
            "provider": setup.provider,
            "scenario": setup.scenario,
            "score": setup.score,
            "by_score": table,
            "scores": {
                k: {
                    "ids": list(v.ids),
                    "patients": list(v.groups),
                    **{n: np.asarray(v[n]).tolist() for n in SCORE_NAMES},
                }
                for k, v in scores.items()
            },
        }
        write_json(setup.output_dir / "scores.json", jsonable(record), overwrite=setup.overwrite)
        print(f"segmentation audit of provider {setup.provider!r} written to {setup.output_dir}")
        return {"ks": ks, "ema": ema}

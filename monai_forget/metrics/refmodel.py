"""The reference-model audit as a MONAI metric (:mod:`monai_forget.audit.refmodel`).

The target runs over the whole audit set — D_Q, the known members and the known
non-members — and each evaluated sample is matched to its role and its reference-model
statistics by content hash, whatever the order or batching.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from monai_forget.audit.refmodel import ROLES
from monai_forget.audit.refmodel_reference import RefModelReference, RoleOutputs
from monai_forget.audit.result import AuditResult
from monai_forget.inference import Predictions
from monai_forget.metrics.base import AuditMetric
from monai_forget.metrics.labels import to_probs_and_labels
from monai_forget.metrics.query_check import QueryCheck, SampleCheck, hash_ids, image_ids

__all__ = ["ReferenceModelAuditMetric", "compute_reference_model_audit"]


def _by_role(
    reference: RefModelReference, probs: np.ndarray, labels: np.ndarray, ids: np.ndarray
) -> RoleOutputs:
    """The target's outputs in the reference's order, role by role."""
    position = {int(i): k for k, i in enumerate(ids)}
    out = {}
    for role in ROLES:
        order = np.array([position[int(i)] for i in hash_ids(reference.hashes[role])])
        if not np.array_equal(labels[order], reference.labels[role]):
            raise ValueError(
                f"the evaluated labels of the {role} differ from the audited ones; evaluate "
                "the audit set with the labels it was audited with"
            )
        out[role] = Predictions(probs[order], labels[order])
    return reference.outputs(out)


def _all_hashes(reference: RefModelReference) -> list[str]:
    """Every sample of the audit set as evaluated: D_Q as given (its copies too)."""
    return [h for role in ROLES for h in reference.hashes[role]] + list(reference.query_copies)


def compute_reference_model_audit(
    y_pred: torch.Tensor | np.ndarray,
    y: torch.Tensor | np.ndarray,
    images: Any,
    reference: RefModelReference,
    *,
    from_logits: bool = False,
) -> AuditResult:
    """The reference-model audit from the target's outputs on the whole audit set.

    Args:
        y_pred: the target's probabilities (or logits with ``from_logits``).
        y: ground-truth classes.
        images: the evaluated images ``(N, C, H, W)``, to match each output to its sample.
        reference: what the auditor learned
            (:meth:`monai_forget.audit.ReferenceModelAuditor.fit_reference`).
    """
    probs, labels = to_probs_and_labels(y_pred, y, from_logits=from_logits)
    ids = image_ids(images).numpy()
    QueryCheck(_all_hashes(reference), name="audit set", copies=reference.query_copies).check(
        ids, "p_member"
    )
    return reference.audit(_by_role(reference, probs, labels, ids))


class ReferenceModelAuditMetric(AuditMetric):
    """Accumulates the target's outputs over the audit set and returns p_member.

    ``aggregate`` returns the set-level p-value and keeps the whole
    :class:`~monai_forget.audit.AuditResult` (three-way decision, membership strength and its
    upper bound, power) in ``last_result``. Every update must come with the images.

    Args:
        reference: a :class:`RefModelReference` or its ``to_dict()`` form.
        from_logits: apply a softmax to ``y_pred`` first.
        margin: "forgotten" needs the upper bound of the membership strength below it (``None``:
            the reference's margin).
    """

    statistic = "p_member"

    def __init__(
        self,
        reference: RefModelReference | dict[str, Any],
        from_logits: bool = False,
        margin: float | None = None,
    ):
        if not isinstance(reference, RefModelReference):
            reference = RefModelReference.from_dict(reference)
        if margin is not None:
            reference = dataclasses.replace(reference, margin=float(margin))
        self.reference = reference
        super().__init__(from_logits, SampleCheck(), _all_hashes(reference),
                         reference.query_copies)  # fmt: skip
        if self.check is not None:
            self.check.name = "audit set (D_Q, known members and non-members)"
        self.last_result: AuditResult | None = None

    def aggregate(self) -> float:  # type: ignore[override]
        probs, labels, ids = self.outputs()
        self.last_result = self.reference.audit(_by_role(self.reference, probs, labels, ids))
        return self.last_result.statistic

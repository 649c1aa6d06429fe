"""The withdrawal auditors: they train reference (shadow) models with the target's recipe
on data the auditor controls, learn a reference from them, and audit the target.

Every auditor (these two and :class:`~monai_forget.audit.ReferenceModelAuditor`) follows
one protocol (:class:`WithdrawalAuditor`), and what it learns one more (:class:`Reference`):

- ``auditor.fit_reference(query, calibration, ...)``: what it learns before any target is
  seen (a :class:`~monai_forget.audit.ks.KSReference`,
  :class:`~monai_forget.audit.ema.EMAReference` or
  :class:`~monai_forget.audit.refmodel_reference.RefModelReference`); the
  evaluation-time metrics, handlers and the bundles' ``reference.json`` are built from
  it;
- ``auditor.audit(target, query, calibration, *, label)``: the whole flow, with
  provenance;
- ``reference.audit(outputs, *, label)``: the audit of the target's outputs computed
  elsewhere (typed: :class:`~monai_forget.inference.Predictions` on D_Q for K-S and EMA,
  :class:`~monai_forget.audit.refmodel_reference.RoleOutputs` on the audit set for the
  reference models) against a reference fitted, loaded, or built from outputs
  (``KSReference.from_predictions``, :meth:`EMAAuditor.reference_from_predictions`).

Each returns one frozen :class:`~monai_forget.audit.result.AuditResult`; both routes
decide the same way on the same outputs, with the same details.

A calibration set may be given whole, or as a ``(members, non-members)`` pair when its
samples are correlated within groups (the slices of one patient) and must be split by
group rather than at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, runtime_checkable

import torch
from torch import nn

from monai_forget.audit.duplicates import Collapsed
from monai_forget.audit.ema import PAPER_METRICS, EMAReference, TestName
from monai_forget.audit.ema_fit import ThresholdBy, Variant, check_metrics, check_variant
from monai_forget.audit.ks import KSReference
from monai_forget.audit.query_checks import check_labels_fit, checked_query
from monai_forget.audit.result import AuditResult
from monai_forget.checks import check_choice, check_fraction
from monai_forget.data import DataOverlapError, LabelledImages, check_disjoint
from monai_forget.defaults import EMA_ALPHA
from monai_forget.fingerprint import data_fingerprint, model_fingerprint
from monai_forget.inference import Predictions, predict
from monai_forget.results import package_versions
from monai_forget.shadow import Recipe, ShadowTrainer

__all__ = [
    "Calibration",
    "EMAAuditor",
    "KSAuditor",
    "ShadowAuditor",
    "WithdrawalAuditor",
    "check_set_size",
]

#: A calibration set D_C, or its (members, non-members) split given by the caller.
Calibration = LabelledImages | tuple[LabelledImages, LabelledImages]


def check_set_size(name: str, data: LabelledImages, minimum: int = 2) -> None:
    """Refuse sets too small for a two-sample statistic."""
    if len(data) < minimum:
        raise ValueError(
            f"the {name} set has {len(data)} sample(s); an audit needs at least {minimum}: "
            f"add samples to the {name} set"
        )


def _check_split(members: LabelledImages, nonmembers: LabelledImages) -> LabelledImages:
    """The union of a given calibration split, refused when its parts share samples."""
    try:
        check_disjoint(
            members,
            nonmembers,
            names=("calibration members", "calibration non-members"),
            symbols=("members", "non-members"),
        )
    except DataOverlapError as err:
        raise ValueError(
            f"the calibration split's members and non-members share samples ({err}); split "
            "the calibration set into disjoint parts (by patient)"
        ) from err
    return members.concat(nonmembers)


def _whole(calibration: Calibration) -> LabelledImages:
    return _check_split(*calibration) if isinstance(calibration, tuple) else calibration


@runtime_checkable
class Reference(Protocol):
    """What every auditor learns: it audits a target's outputs (the module docstring)."""

    def audit(self, outputs: Any, /, *, label: str = "") -> AuditResult: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class WithdrawalAuditor(Protocol):
    """What every withdrawal auditor offers (the module docstring)."""

    def fit_reference(self, query: LabelledImages, calibration: Any, /) -> Reference: ...

    def audit(
        self, target: nn.Module, query: LabelledImages, calibration: Any, /, *, label: str = ""
    ) -> AuditResult: ...


@dataclass
class ShadowAuditor:
    """Common configuration of auditors that train shadow models from a recipe.

    Args:
        recipe: the target's training design ("the same design", Liu & Tsaftaris 2020).
        seed: seeds shadow training and any random split of the calibration set.
        device: where shadow models train and every model runs.
        cache_dir: cache for shadow weights and predictions (``None``: no cache).
        batch_size: inference batch size.
        progress: show progress bars during inference.

    Attributes:
        reference_: what the last ``fit_reference`` or ``audit`` learned (scikit-learn's
            convention for fitted state), for the evaluation-time metrics.
        cache_entries_: file -> SHA-256 of every cache entry (weights, predictions) the
            last fit read or wrote; the provenance records them.
        query_collapsed_: D_Q's copies collapsed by the last fit
            (:func:`~monai_forget.audit.query_checks.checked_query`); the audit decides on
            the distinct images.
    """

    recipe: Recipe | None = None
    seed: int = 0
    device: str | torch.device = "cpu"
    cache_dir: str | Path | None = None
    batch_size: int = 256
    progress: bool = False
    reference_: Any = field(default=None, init=False, repr=False, compare=False)
    cache_entries_: dict[str, str] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    query_collapsed_: Collapsed | None = field(default=None, init=False, repr=False, compare=False)

    def audit(
        self,
        target: nn.Module,
        query: LabelledImages,
        calibration: Calibration,
        *,
        label: str = "",
    ) -> AuditResult:
        """Has ``target`` forgotten ``query``? ``calibration`` (D_C, whole or as its
        ``(members, non-members)`` split) must share no sample with it."""
        whole = _whole(calibration)
        check_labels_fit(target, {"query set D_Q": query, "calibration set D_C": whole})
        result = self._audit_checked(target, query, calibration, label)
        return result.adding(details=self.query_collapsed_.as_details())

    def _audit_checked(
        self, target: nn.Module, query: LabelledImages, calibration: Calibration, label: str
    ) -> AuditResult:
        """The audit once the sets are checked (each auditor's own)."""
        raise NotImplementedError

    def _start(self, query: LabelledImages, calibration: LabelledImages) -> LabelledImages:
        """Check the sets; D_Q's distinct images, which the audit decides on (copies of
        one image are one sample: scored as many, they shrink the test's spread)."""
        self.cache_entries_ = {}
        check_set_size("query", query)
        check_set_size("calibration", calibration)
        self.query_collapsed_ = checked_query(query, calibration)
        query = self.query_collapsed_.distinct
        check_disjoint(query, calibration)
        return query

    def _train(self, data: LabelledImages) -> nn.Module:
        if self.recipe is None:
            raise ValueError(
                "this audit trains shadow models: pass recipe=... (the target's design)"
            )
        trainer = self._trainer()
        model = trainer.train(data, seed=self.seed)
        self.cache_entries_.update(trainer.cache_entries)
        return model

    def _trainer(self) -> ShadowTrainer:
        return ShadowTrainer(
            self.recipe, device=self.device, cache_dir=self.cache_dir, progress=self.progress
        )

    def _predict(self, model: nn.Module, data: LabelledImages) -> Predictions:
        out = predict(
            model,
            data,
            batch_size=self.batch_size,
            device=self.device,
            cache_dir=self.cache_dir,
            progress=self.progress,
        )
        if out.cache_entry is not None:
            self.cache_entries_[out.cache_entry[0]] = out.cache_entry[1]
        return out

    def _options(self) -> dict[str, Any]:
        """The auditor's own settings (beyond the shared ones) for provenance."""
        shared = {f.name for f in fields(ShadowAuditor)}
        return {
            f.name: getattr(self, f.name) for f in fields(self) if f.init and f.name not in shared
        }

    def _provenance(
        self, models: dict[str, nn.Module], data: dict[str, LabelledImages], **extra: Any
    ) -> dict[str, Any]:
        return {
            "models": {name: model_fingerprint(m) for name, m in models.items()},
            "data": {name: data_fingerprint(d) for name, d in data.items()},
            "recipe": None if self.recipe is None else self.recipe.name,
            "seed": self.seed,
            "options": {**self._options(), **extra},
            "versions": package_versions(),
            # the exact files that decided, when read from or written to a cache
            "cache_entries": dict(sorted(self.cache_entries_.items())),
        }


class KSAuditor(ShadowAuditor):
    """Withdrawal audit with the K-S calibrated ratio (Liu & Tsaftaris 2020, Algorithm 1).

    Trains a query shadow model on D_Q and a calibration shadow model on D_C with the
    target's recipe, runs both over D_Q (the :class:`KSReference`), then compares the
    target's ground-truth class confidences on D_Q with theirs. See
    ``docs/ks_auditor.md`` for assumptions and failure modes.
    """

    def _fit(
        self, query: LabelledImages, calibration: LabelledImages
    ) -> tuple[KSReference, dict[str, nn.Module]]:
        query = self._start(query, calibration)
        shadows = {
            "query_shadow": self._train(query),
            "calibration_shadow": self._train(calibration),
        }
        self.reference_ = KSReference.from_predictions(
            self._predict(shadows["query_shadow"], query),
            self._predict(shadows["calibration_shadow"], query),
        )
        return self.reference_, shadows

    def fit_reference(self, query: LabelledImages, calibration: Calibration) -> KSReference:
        """The shadow models' confidences on D_Q, for evaluation-time metrics and handlers
        (with D_Q's content hashes, so they check they evaluate D_Q)."""
        reference = self._fit(query, _whole(calibration))[0]
        return replace(reference, query_hashes=tuple(query.sample_hashes),
                       query_copies=self.query_collapsed_.copies)  # fmt: skip

    def _audit_checked(
        self, target: nn.Module, query: LabelledImages, calibration: Calibration, label: str
    ) -> AuditResult:
        whole = _whole(calibration)
        reference, shadows = self._fit(query, whole)
        query = self.query_collapsed_.distinct
        result = reference.audit(self._predict(target, query), label=label)
        return result.adding(
            sizes={"calibration": len(whole)},
            provenance=self._provenance(
                {"target": target, **shadows}, {"query": query, "calibration": whole}
            ),
        )


@dataclass
class EMAAuditor(ShadowAuditor):
    """Withdrawal audit with Ensembled Membership Auditing (Huang, Li & Li 2021).

    The calibration set is split (seeded, stratified; or as given) into members, on
    which a reference model is trained with the target's recipe, and held-out
    non-members; thresholds are learned on that model's outputs (the
    :class:`EMAReference`) and applied to the target's outputs on the query set.

    Args:
        alpha: significance level; rho_EMA <= alpha means forgotten (paper: 0.1).
        metrics: membership metrics to OR (paper: all four).
        threshold_by: class whose threshold applies: true ``"label"`` (paper) or
            ``"prediction"`` (reference code).
        test: ``"welch"`` (default) or ``"student"`` (reference code).
        calibration_outputs: thresholds from a ``"shadow"`` model trained on the
            calibration members (paper), or from the ``"target"`` model's outputs on the
            calibration split (reference code; the member half must then be part of the
            target's training data).
        member_fraction: share of the calibration set used as members (random split).
        variant: ``"paper"`` or ``"reference-code"`` threshold rules
            (:mod:`~monai_forget.audit.ema_fit`); :meth:`reference_code` sets every option
            the authors' code uses.
    """

    alpha: float = EMA_ALPHA
    metrics: tuple[str, ...] = PAPER_METRICS
    threshold_by: ThresholdBy = "label"
    test: TestName = "welch"
    calibration_outputs: Literal["shadow", "target"] = "shadow"
    member_fraction: float = 0.5
    variant: Variant = "paper"

    @classmethod
    def reference_code(cls, **options: Any) -> EMAAuditor:
        """The authors' public code: the three metrics, thresholds fitted by label on the
        target's own outputs on a calibration split (its members must be training data of
        the target) and applied by predicted class, first-maximiser ties, threshold 0 for
        an empty class, Student's t-test. ``options`` sets the rest (recipe, seed, ...)."""
        settings = {
            "metrics": PAPER_METRICS,
            "test": "student",
            "calibration_outputs": "target",
            "variant": "reference-code",
        }
        return cls(**{**settings, **options})

    def __post_init__(self) -> None:
        # refused here, before any shadow model trains
        check_variant(self.variant)
        check_metrics(self.metrics)
        check_choice("threshold_by", self.threshold_by, get_args(ThresholdBy))
        check_choice("test", self.test, get_args(TestName))
        check_fraction("alpha", self.alpha)
        check_fraction("member_fraction", self.member_fraction)
        check_choice("calibration_outputs", self.calibration_outputs, ("shadow", "target"))

    def _split(self, calibration: Calibration) -> tuple[LabelledImages, LabelledImages]:
        if isinstance(calibration, tuple):
            _check_split(*calibration)
            return calibration
        check_set_size("calibration", calibration, minimum=4)
        return calibration.split(self.member_fraction, seed=self.seed)

    def _fit(
        self, calibration: Calibration, target: nn.Module | None
    ) -> tuple[EMAReference, nn.Module, tuple[int, int]]:
        self.cache_entries_ = {}
        members, nonmembers = self._split(calibration)
        if self.calibration_outputs == "target":
            if target is None:
                raise ValueError("calibration_outputs='target' needs the target model")
            model = target
        else:
            model = self._train(members)
        self.reference_ = self.reference_from_predictions(
            self._predict(model, members), self._predict(model, nonmembers)
        )
        return self.reference_, model, (len(members), len(nonmembers))

    def fit_reference(
        self,
        query: LabelledImages | None,
        calibration: Calibration,
        *,
        target: nn.Module | None = None,
    ) -> EMAReference:
        """Step 1 calibration alone: the thresholds the evaluation-time metrics apply.

        Step 1 never looks at ``query``: it is only checked to share no sample with
        ``calibration``, and its content hashes go with the reference, so the
        evaluation-time metric checks it evaluates D_Q (``None`` when the thresholds
        serve queries not known yet: the metric then needs ``query_hashes`` or
        ``check_query=False``). ``target`` is needed only with
        ``calibration_outputs="target"``.
        """
        if query is None:
            return self._fit(calibration, target)[0]
        self._start(query, _whole(calibration))
        reference = self._fit(calibration, target)[0]
        return replace(reference, query_hashes=tuple(query.sample_hashes),
                       query_copies=self.query_collapsed_.copies)  # fmt: skip

    def reference_from_predictions(
        self, members: Predictions, nonmembers: Predictions
    ) -> EMAReference:
        """Step 1 from the reference model's outputs on the calibration split."""
        return EMAReference.from_predictions(
            members,
            nonmembers,
            metrics=self.metrics,
            threshold_by=self.threshold_by,
            variant=self.variant,
            alpha=self.alpha,
            test=self.test,
        )

    def _audit_checked(
        self, target: nn.Module, query: LabelledImages, calibration: Calibration, label: str
    ) -> AuditResult:
        whole = _whole(calibration)
        query = self._start(query, whole)
        reference, model, _ = self._fit(calibration, target)
        return reference.audit(self._predict(target, query), label=label).adding(
            provenance=self._provenance(
                {"target": target, "calibration_reference": model},
                {"query": query, "calibration": whole},
                **({"calibration_split": "given"} if isinstance(calibration, tuple) else {}),
            )
        )

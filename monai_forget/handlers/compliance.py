"""Fail an evaluation when the audit metrics say a withdrawn provider is remembered."""

from __future__ import annotations

from typing import Any

from monai_forget.audit.ema import ema_decision, ema_rule
from monai_forget.audit.ks import KS_RULE, ks_decision
from monai_forget.audit.refmodel_reference import check_levels
from monai_forget.audit.result import FORGOTTEN, INCONCLUSIVE, NOT_FORGOTTEN
from monai_forget.checks import check_fraction
from monai_forget.defaults import EMA_ALPHA, REFMODEL_ALPHA, REFMODEL_MARGIN

__all__ = ["ComplianceError", "ComplianceGate"]


class ComplianceError(RuntimeError):
    """An evaluated model still remembers a provider it was required to forget."""


class ComplianceGate:
    """Fail an evaluation when the audit metrics say a withdrawn provider is remembered.

    Attach it to a ``SupervisedEvaluator`` with the audit handlers among its metrics
    (:class:`~monai_forget.handlers.ReferenceModelAudit` over the audit set, or
    :class:`~monai_forget.handlers.KSCalibratedRatio` /
    :class:`~monai_forget.handlers.EMAPValue` over D_Q). At each epoch completion (after
    the metrics are computed) it reads them from ``engine.state.metrics`` and raises
    :class:`ComplianceError` unless every checked auditor says "forgotten", by the
    auditors' own rules:

    - reference models (the default): the audit's own three-way decision
      (``<name>_forgotten`` from :class:`~monai_forget.handlers.ReferenceModelAudit`:
      1 only for "forgotten", its data checks included), and the gate's own levels on
      top, which can only be stricter: p_member > ``refmodel_alpha`` (no evidence of
      remembering) and the upper bound of D_Q's membership strength relative to the known members
      (``<name>_upper``) below ``margin``;
    - rho_KS < 1 (Liu & Tsaftaris 2020, Sec. 3: rho_KS >= 1 means forgotten);
    - rho_EMA > alpha (Huang, Li & Li 2021: rho_EMA <= alpha means not memorised).

    Args:
        provider: name of the provider that must be forgotten (used in the message).
        refmodel_metric: name of the reference-model metric (p_member; the share's bound
            is read from ``<name>_upper``, the audit's whole decision from
            ``<name>_forgotten``), or ``None`` to ignore it.
        ks_metric: name of the rho_KS metric, or ``None`` to ignore K-S.
        ema_metric: name of the rho_EMA metric, or ``None`` to ignore EMA.
        alpha: EMA significance level (the paper's 0.1 by default).
        refmodel_alpha: level of the reference-model test.
        margin: the largest membership strength of D_Q, relative to the known members,
            that counts as forgotten (its upper bound must be below it).

    Raises:
        ValueError: every metric name is ``None`` or a level is outside (0, 1).
    """

    def __init__(
        self,
        provider: str,
        refmodel_metric: str | None = "p_member",
        ks_metric: str | None = None,
        ema_metric: str | None = None,
        alpha: float = EMA_ALPHA,
        refmodel_alpha: float = REFMODEL_ALPHA,
        margin: float = REFMODEL_MARGIN,
    ) -> None:
        if refmodel_metric is None and ks_metric is None and ema_metric is None:
            raise ValueError("ComplianceGate needs refmodel_metric, ks_metric or ema_metric")
        check_fraction("alpha", alpha)
        check_levels(refmodel_alpha, margin)
        self.provider = str(provider)
        self.refmodel_metric = refmodel_metric
        self.ks_metric = ks_metric
        self.ema_metric = ema_metric
        self.alpha = float(alpha)
        self.refmodel_alpha = float(refmodel_alpha)
        self.margin = float(margin)
        #: the outcome of the last check: metric name -> (value, forgotten?)
        self.last_check: dict[str, tuple[float, bool]] = {}

    def attach(self, engine: Any) -> None:
        """Check at every epoch completion of ``engine`` (registered after its metrics)."""
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_COMPLETED, self)

    def _rules(self, metrics: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        """(metric name, decision of a value, why a value fails) for the metrics checked."""
        rules: list[tuple[str, Any, Any]] = []
        if self.refmodel_metric is not None:
            upper = float(metrics.get(f"{self.refmodel_metric}_upper", float("inf")))
            audit_says = float(metrics.get(f"{self.refmodel_metric}_forgotten", 0.0)) >= 1.0

            def refmodel(p: float) -> str:
                if p <= self.refmodel_alpha:
                    return NOT_FORGOTTEN
                ok = audit_says and upper < self.margin
                return FORGOTTEN if ok else INCONCLUSIVE

            def why(p: float) -> str:
                if p <= self.refmodel_alpha:
                    return (
                        f"<= {self.refmodel_alpha:g}: evidence that D_Q is still remembered "
                        "(not forgotten)"
                    )
                if upper >= self.margin:
                    return (
                        f"> {self.refmodel_alpha:g}, but D_Q's membership strength may be up to "
                        f"{min(upper, 1.0):.0%} of the known members' (upper bound), not below "
                        f"the margin {self.margin:g}: the audit cannot show forgetting "
                        "(inconclusive)"
                    )
                return (
                    f"> {self.refmodel_alpha:g} with the bound below the margin, but the audit "
                    "made no decision: its checks of the data failed (D_Q, the known members "
                    "and non-members look differently distributed to the reference models, or "
                    "the known members are not member-like); see the audit's warnings "
                    "(inconclusive)"
                )

            rules.append((self.refmodel_metric, refmodel, why))
        if self.ks_metric is not None:
            rules.append((self.ks_metric, ks_decision, lambda _: f"< 1 ({KS_RULE})"))
        if self.ema_metric is not None:
            rules.append(
                (
                    self.ema_metric,
                    lambda p: ema_decision(p, self.alpha),
                    lambda _: f"> alpha = {self.alpha:g} ({ema_rule(self.alpha)})",
                )
            )
        return rules

    def check(self, metrics: dict[str, Any]) -> dict[str, tuple[float, bool]]:
        """Decide from a metrics mapping; raise :class:`ComplianceError` if not forgotten."""
        outcome: dict[str, tuple[float, bool]] = {}
        failures: list[str] = []
        for name, decide, why in self._rules(metrics):
            if name not in metrics:
                raise KeyError(
                    f"ComplianceGate needs metric {name!r} in engine.state.metrics (found "
                    f"{sorted(metrics)}); attach the auditor handler under that name, e.g. "
                    f"additional_metrics={{{name!r}: ...}}"
                )
            value = float(metrics[name])
            forgotten = decide(value) == FORGOTTEN
            outcome[name] = (value, forgotten)
            if not forgotten:
                failures.append(f"{name} = {value:.4g} {why(value)}")
        self.last_check = outcome
        if failures:
            raise ComplianceError(
                f"provider {self.provider!r} must be forgotten, but the audit does not show "
                f"it: {'; '.join(failures)}. Retrain without the provider (or unlearn it) and "
                "audit again; an inconclusive audit needs more reference models or data."
            )
        return outcome

    def __call__(self, engine: Any) -> None:
        self.check(engine.state.metrics)

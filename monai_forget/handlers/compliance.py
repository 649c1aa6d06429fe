"""Fail an evaluation when the audit metrics say a withdrawn provider is remembered."""

from __future__ import annotations

from typing import Any

from monai_forget.audit.ema import ema_decision, ema_rule
from monai_forget.audit.ks import KS_RULE, ks_decision
from monai_forget.audit.result import FORGOTTEN

__all__ = ["ComplianceError", "ComplianceGate"]


class ComplianceError(RuntimeError):
    """An evaluated model still remembers a provider it was required to forget."""


class ComplianceGate:
    """Fail an evaluation when the audit metrics say a withdrawn provider is remembered.

    Attach it to a ``SupervisedEvaluator`` that runs over the withdrawn provider's data
    D_Q with :class:`~monai_forget.handlers.KSCalibratedRatio` and/or
    :class:`~monai_forget.handlers.EMAPValue` among its metrics. At each epoch
    completion (after the metrics are computed) it reads them from
    ``engine.state.metrics`` and raises :class:`ComplianceError` when any says "not
    forgotten", by the auditors' own rules (:func:`~monai_forget.audit.ks_decision`,
    :func:`~monai_forget.audit.ema_decision`):

    - rho_KS < 1 (Liu & Tsaftaris 2020, Sec. 3: rho_KS >= 1 means forgotten);
    - rho_EMA > alpha (Huang, Li & Li 2021: rho_EMA <= alpha means not memorised).

    Args:
        provider: name of the provider that must be forgotten (used in the message).
        ks_metric: name of the rho_KS metric, or ``None`` to ignore K-S.
        ema_metric: name of the rho_EMA metric, or ``None`` to ignore EMA.
        alpha: EMA significance level (the paper's 0.1 by default).

    Raises:
        ValueError: both metric names are ``None`` or ``alpha`` is outside (0, 1).
    """

    def __init__(
        self,
        provider: str,
        ks_metric: str | None = "rho_KS",
        ema_metric: str | None = "rho_EMA",
        alpha: float = 0.1,
    ) -> None:
        if ks_metric is None and ema_metric is None:
            raise ValueError("ComplianceGate needs ks_metric, ema_metric or both")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.provider = str(provider)
        self.ks_metric = ks_metric
        self.ema_metric = ema_metric
        self.alpha = float(alpha)
        #: the outcome of the last check: metric name -> (value, forgotten?)
        self.last_check: dict[str, tuple[float, bool]] = {}

    def attach(self, engine: Any) -> None:
        """Check at every epoch completion of ``engine`` (registered after its metrics)."""
        from ignite.engine import Events

        engine.add_event_handler(Events.EPOCH_COMPLETED, self)

    def _rules(self) -> list[tuple[str, Any, str]]:
        """(metric name, decision of a value, why a value fails) for the metrics checked."""
        rules = []
        if self.ks_metric is not None:
            rules.append((self.ks_metric, ks_decision, f"< 1 ({KS_RULE})"))
        if self.ema_metric is not None:
            rules.append(
                (
                    self.ema_metric,
                    lambda p: ema_decision(p, self.alpha),
                    f"> alpha = {self.alpha:g} ({ema_rule(self.alpha)})",
                )
            )
        return rules

    def check(self, metrics: dict[str, Any]) -> dict[str, tuple[float, bool]]:
        """Decide from a metrics mapping; raise :class:`ComplianceError` if not forgotten."""
        outcome: dict[str, tuple[float, bool]] = {}
        failures: list[str] = []
        for name, decide, why in self._rules():
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
                failures.append(f"{name} = {value:.4g} {why}")
        self.last_check = outcome
        if failures:
            raise ComplianceError(
                f"provider {self.provider!r} must be forgotten, but the evaluated model still "
                f"remembers its data: {'; '.join(failures)}. Retrain without the provider "
                "(or unlearn it) and audit again."
            )
        return outcome

    def __call__(self, engine: Any) -> None:
        self.check(engine.state.metrics)

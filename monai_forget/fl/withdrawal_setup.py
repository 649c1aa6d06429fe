"""A federated withdrawal set up once (issue 67, item 3): ``fl simulate`` and a Python user
build the same :class:`FederatedWithdrawal`, checked when built (before any data is read
or FLARE starts), and run it."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monai_forget import defaults
from monai_forget.checks import check_choice
from monai_forget.defaults import DEVICE, FORSAKEN_GENERATOR, RETRAINED_MODELS, SEED
from monai_forget.fl.run import check_withdrawal, default_auditors

__all__ = ["FederatedWithdrawal"]


@dataclass(frozen=True)
class FederatedWithdrawal:
    """One provider leaving a federation on real data, measured (``fl simulate``).

    Args:
        data: the providers' data set (:data:`~monai_forget.defaults.FL_DATASETS`).
        clients: number of providers (site-1, site-2, ...).
        patients_per_class: ACDC: patients of each class per provider (``None``: 1 for
            slices, 3 for clinical features).
        size: ACDC slices: height and width.
        centre: ACDC slices: subtract the calibration mean image.
        per_client: PneumoniaMNIST / MNIST: samples per provider.
        site_signature: PneumoniaMNIST / MNIST: burn the constructed site signature into
            the withdrawing provider's images.
        rounds, local_steps, hidden: FedAvg's rounds, local steps and the MLP's widths.
        withdraw: the withdrawing provider.
        method: how it leaves (``None``: the measured default,
            :func:`~monai_forget.fl.spec.departure`).
        withdraw_round: the round a provider leaving during training leaves in.
        site_joins: the round the withdrawing provider first trained in.
        generator: Forsaken's generator settings (method ``"forsaken"`` only).
        remaining: the remaining provider audited (``None``: the first that stays).
        auditors: the auditors (``None``: :func:`~monai_forget.fl.run.default_auditors`).
        retrained: models retrained without the provider, compared with the final one.
        seed, device: of the federation, training, withdrawal and audits.
        backend: ``"simulator"`` or ``"poc"`` (a FLARE POC deployment).

    Raises:
        ValueError: when built, for a withdrawal that cannot be run or measured (the
            rules of :func:`~monai_forget.fl.run.check_withdrawal`, an unknown data set,
            a site signature on ACDC).
    """

    data: str = defaults.FL_DATA
    clients: int = defaults.FL_CLIENTS
    patients_per_class: int | None = None
    size: int = defaults.FL_SLICE_SIZE
    centre: bool = True
    per_client: int = defaults.FL_PER_CLIENT
    site_signature: bool = False
    rounds: int = defaults.FL_ROUNDS
    local_steps: int = defaults.FL_LOCAL_STEPS
    hidden: Sequence[int] = defaults.FL_HIDDEN
    withdraw: str = defaults.FL_WITHDRAWING
    method: str | None = None
    withdraw_round: int = defaults.FL_WITHDRAW_ROUND
    site_joins: int = 0
    generator: Mapping[str, Any] = field(default_factory=lambda: dict(FORSAKEN_GENERATOR))
    remaining: str | None = None
    auditors: Sequence[str] | None = None
    retrained: int = RETRAINED_MODELS
    seed: int = SEED
    device: str = DEVICE
    backend: str = "simulator"

    def __post_init__(self) -> None:
        check_choice("data", self.data, defaults.FL_DATASETS)
        check_choice("backend", self.backend, ("simulator", "poc"))
        auditors = default_auditors(self.clients) if self.auditors is None else self.auditors
        object.__setattr__(self, "auditors", tuple(auditors))
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        remaining = [self.remaining] if self.remaining else None
        check_withdrawal(self.sites, self.withdraw, remaining, self.auditors, self.retrained)
        if self.site_signature and self.data.startswith("acdc"):
            raise ValueError(
                "site_signature is a constructed scenario for pneumoniamnist / mnist; ACDC "
                "providers differ by their patients"
            )
        self.withdrawal()  # the method and its settings, refused now if wrong

    @property
    def sites(self) -> list[str]:
        """The providers' names."""
        return [f"site-{i + 1}" for i in range(self.clients)]

    def withdrawal(self):
        """How the provider leaves (:func:`~monai_forget.fl.spec.departure`)."""
        from monai_forget.fl.spec import departure

        generator = {**self.generator, "device": self.device} if self.method == "forsaken" else {}
        return departure(self.withdraw, self.method, round=self.withdraw_round,
                         joined=self.site_joins, generator=generator)  # fmt: skip

    def federation(self):
        """The providers' data (read from ``$MONAI_FORGET_DATA``)."""
        from monai_forget.fl.run import acdc_feature_federation, acdc_federation, sample_federation

        per_class = self.patients_per_class or defaults.FL_PATIENTS_PER_CLASS.get(self.data)
        if self.data == "acdc":
            return acdc_federation(size=self.size, n_clients=self.clients,
                                   patients_per_class=per_class, centre=self.centre,
                                   seed=self.seed)  # fmt: skip
        if self.data == "acdc-features":
            return acdc_feature_federation(n_clients=self.clients, patients_per_class=per_class,
                                           seed=self.seed)  # fmt: skip
        signed = self.withdraw if self.site_signature else None
        return sample_federation(self.data, n_clients=self.clients, per_client=self.per_client,
                                 signed=signed, seed=self.seed)  # fmt: skip

    def run(self, out: str | os.PathLike, *, overwrite: bool = False):
        """Run the withdrawal and write ``results.json``, ``summary.md`` and ``report.html``
        to ``out`` (FLARE's workspace under ``out/workspace``); returns the outcome and
        the paths written. The outputs (and, for POC, FLARE's ports) are checked before
        any data is read."""
        from monai_forget.fl.outcome import check_outputs
        from monai_forget.fl.poc import check_ports_free
        from monai_forget.fl.run import mlp_config, simulate_withdrawal
        from monai_forget.unlearning.evaluation import AuditPlan

        out = Path(out)
        check_outputs(out, overwrite)
        if self.backend == "poc":
            check_ports_free()
        federation = self.federation()
        config = mlp_config(federation, hidden=self.hidden, rounds=self.rounds,
                            local_steps=self.local_steps, seed=self.seed)  # fmt: skip
        plan = AuditPlan(self.auditors, seed=self.seed, device=self.device,
                         cache_dir=out / "cache")  # fmt: skip
        outcome = simulate_withdrawal(
            federation, config, self.withdrawal(), out / "workspace",
            remaining=[self.remaining] if self.remaining else None, plan=plan,
            backend=self.backend, retrained=self.retrained,
        )  # fmt: skip
        paths = outcome.write(out, overwrite=overwrite, data=self.data, seed=self.seed)
        return outcome, paths

"""What a federated withdrawal found, and its three output files.

:class:`WithdrawalOutcome` holds the FLARE run, the measurement of the withdrawal
(:class:`~monai_forget.unlearning.evaluation.WithdrawalEvaluation`) and, when models
were retrained without the provider, the comparison with them and the forgetting rate
retraining gets on the same oracle: Liu et al. 2020's FR shows elimination only beside
what retraining scores (``docs/unlearning.md``). It renders itself (``summary``,
``to_dict``) and writes ``results.json``, ``summary.md`` and ``report.html``, each
atomically, never replacing a file without ``overwrite``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from monai_forget.auditor_registry import AUDITORS
from monai_forget.fl.job import FederatedRun
from monai_forget.io import atomic_write, check_writable
from monai_forget.results import write_json
from monai_forget.unlearning.evaluation import WithdrawalEvaluation
from monai_forget.unlearning.federaser import WithdrawalCost
from monai_forget.unlearning.retrain_reference import RetrainComparison

__all__ = ["OUTPUT_FILES", "WithdrawalOutcome", "check_outputs"]

#: The files :meth:`WithdrawalOutcome.write` writes into its folder.
OUTPUT_FILES = ("results.json", "summary.md", "report.html")


def check_outputs(out: str | os.PathLike, overwrite: bool = False) -> dict[str, Path]:
    """The output paths in ``out``, refused before any work when one exists and
    ``overwrite`` is false (see :func:`monai_forget.io.check_writable`)."""
    return {name: check_writable(Path(out) / name, overwrite) for name in OUTPUT_FILES}


@dataclass
class WithdrawalOutcome:
    """A FLARE run with a withdrawal and its measurement.

    Attributes:
        run: The FLARE run (final global model, client records, log folder).
        evaluation: Forgetting rate, audits and accuracies before and after.
        description: One line saying how the federation was built.
        versus_retraining: The final model against models retrained without the
            provider (``None``: none were retrained).
        retraining_forgetting_rate: The FR those retrained models get on the same oracle
            (B.R.R x their mean share of the withdrawn samples called non-members).
        site: The withdrawn site (default: the run's withdrawal's).
        cost: What removing it cost, for a method run after training (FedEraser,
            retraining).
    """

    run: FederatedRun
    evaluation: WithdrawalEvaluation
    description: str = ""
    versus_retraining: RetrainComparison | None = None
    retraining_forgetting_rate: float | None = None
    site: str = ""
    cost: WithdrawalCost | None = None

    @property
    def withdrawn(self) -> str:
        if self.site:
            return self.site
        return self.run.withdrawal.client if self.run.withdrawal is not None else ""

    def to_dict(self) -> dict[str, Any]:
        versus = self.versus_retraining
        return {
            **self.evaluation.to_dict(),
            "retraining_forgetting_rate": self.retraining_forgetting_rate,
            "versus_retraining": None if versus is None else versus.to_dict(),
            "withdrawal": self.run.record,
            "cost": None if self.cost is None else asdict(self.cost),
            "federation": self.description,
            "logs": {
                "console": str(self.run.workspace / "simulator.log"),
                "flare": str(self.run.log_dir),
            },
        }

    def summary(self) -> str:
        """The markdown of ``summary.md``."""
        ev, withdrawn = self.evaluation, self.withdrawn
        fr = self.retraining_forgetting_rate
        beside = (
            "retraining's not measured: without it FR does not show elimination"
            if fr is None
            else f"retraining from scratch on the same oracle: FR {100 * fr:.2f}%"
        )
        lines = [f"# Withdrawal of {withdrawn}: {ev.label}", "", f"Federation: {self.description}"]
        lines += ["", f"Forgetting rate: {ev.rate.summary()}; {beside}", ""]
        if self.cost is not None:
            c = self.cost
            lines += [
                f"Cost of removing {withdrawn} ({ev.label}): {c.local_steps:,} local steps by "
                f"the sites that stay in {c.rounds} round{'' if c.rounds == 1 else 's'}, "
                f"{c.seconds:.1f} s; the server "
                f"kept {c.server_bytes / 2**20:.1f} MiB from training for it",
                "",
            ]
        if self.versus_retraining is not None:
            versus = self.versus_retraining
            lines += [
                f"Against {len(versus.retrained_means)} models retrained without {withdrawn}, "
                f"on its data: {versus.summary()}",
                "",
            ]
        lines += [
            "| stage | provider | " + " | ".join(k.title for k in AUDITORS) + " |",
            "|---|---|" + "---|" * len(AUDITORS),
        ]
        stay = [s for (stage, s, _m) in ev.audits if stage == "after" and s != withdrawn]
        # the first remaining provider audited, if any (no auditors: no audit rows)
        rows = [("before", withdrawn), ("after", withdrawn), *[("after", s) for s in stay[:1]]]
        for stage, site in rows:
            cells = []
            for kind in AUDITORS:
                a = ev.audits.get((stage, site, kind.name))
                cells.append(
                    "-" if a is None else f"{a.decision} ({a.statistic_name} = {a.statistic:.3g})"
                )
            lines.append(f"| {stage} | {site} | " + " | ".join(cells) + " |")
        lines += ["", "| data | accuracy before | accuracy after |", "|---|---|---|"]
        for name, acc in ev.accuracy["before"].items():
            lines.append(f"| {name} | {acc:.3f} | {ev.accuracy['after'][name]:.3f} |")
        return "\n".join([*lines, ""])

    def write(
        self, out: str | os.PathLike, *, overwrite: bool = False, **extra: Any
    ) -> dict[str, Path]:
        """Write ``results.json`` (``to_dict`` plus ``extra``), ``summary.md`` and
        ``report.html`` into ``out``; every path is checked before the first is written.

        Raises:
            FileExistsError: an output exists and ``overwrite`` is false.
        """
        from monai_forget.audit import write_report

        paths = check_outputs(out, overwrite)
        write_json(paths["results.json"], {**self.to_dict(), **extra}, overwrite=overwrite)
        with atomic_write(paths["summary.md"], "w", overwrite=overwrite) as handle:
            handle.write(self.summary())
        write_report(
            list(self.evaluation.audits.values()),
            paths["report.html"],
            title=f"Withdrawal of {self.withdrawn} ({self.evaluation.label})",
            overwrite=overwrite,
        )
        return paths

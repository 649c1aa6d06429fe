"""One answer from the reference-model audits without and with D_Q's site's images (the
two designs of :mod:`monai_forget.audit.refmodel_auditor`): theirs where they agree."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from monai_forget.audit.refmodel import both_designs
from monai_forget.audit.result import (
    FORGOTTEN,
    NOT_FORGOTTEN,
    AuditResult,
    share_text,
    strength_text,
)

__all__ = ["joint_answer"]


def _design(result: AuditResult) -> dict[str, Any]:
    d = result.details
    return {
        "decision": result.decision,
        "p_member": result.statistic,
        "membership_strength": d.get("membership_strength"),
        "membership_strength_upper": d.get("membership_strength_upper"),
        "reference_setting": d.get("reference_setting"),
        "reason": d.get("reason"),
        "hidden_shift_tolerance": d.get("hidden_shift_tolerance"),
    }


def _tolerance(*designs: AuditResult) -> float:
    """The joint "forgotten"'s hidden-shift tolerance: the smaller of the designs' (NaN
    when either has none)."""
    values = [r.details.get("hidden_shift_tolerance", "nan") for r in designs]
    return float(np.min(np.asarray(values, dtype=np.float64)))


def joint_answer(without: AuditResult, with_site: AuditResult, n_site: int) -> AuditResult:
    """One answer from the audits without and with D_Q's site's images: theirs where they
    agree, else inconclusive; the p-value and the bound the larger of the two (each holds
    for the joint answer), the estimate the one beside that bound, every model and cache
    entry that decided in the provenance."""
    decision = both_designs(without.decision, with_site.decision)
    alpha, margin = without.details["alpha"], without.details["margin"]
    wider = max((without, with_site), key=lambda r: r.details["membership_strength_upper"])
    upper = wider.details["membership_strength_upper"]
    p_values = (
        f"p = {without.statistic:.2g} without D_Q's site's images, "
        f"{with_site.statistic:.2g} with them"
    )
    if decision == FORGOTTEN:
        reason = (
            f"no evidence of remembering with or without D_Q's site's images ({p_values}); "
            f"{strength_text(upper, alpha)} in both, below the margin {margin:g}"
        )
    elif decision == NOT_FORGOTTEN:
        reason = (
            f"evidence of remembering with and without D_Q's site's images ({p_values}, "
            f"each <= {alpha:g}); its membership strength is an estimated "
            f"{share_text(wider.details['membership_strength'])} of the known members' "
            f"({1 - alpha:.0%} upper bound {share_text(upper)})"
        )
    elif without.decision == with_site.decision:
        reason = (
            f"inconclusive with and without D_Q's site's images; without them: "
            f"{without.details['reason']}; with them: {with_site.details['reason']}"
        )
    else:
        reason = (
            f"the audits disagree: without D_Q's site's images {without.decision}, with them "
            f"{with_site.decision}; an answer needs both (without the site's images a "
            'partly remembered D_Q of another site is not certified "forgotten", with them a '
            'never-seen D_Q of a site the target knows is not called "not forgotten")'
        )
    provenance = dict(without.provenance)
    provenance["models"] = {
        **without.provenance["models"],
        **{f"with_site_{k}": v for k, v in with_site.provenance["models"].items()
           if k != "target"},
    }  # fmt: skip
    provenance["data"] = {**without.provenance["data"], "site": with_site.provenance["data"]}
    provenance["cache_entries"] = dict(sorted({
        **without.provenance["cache_entries"], **with_site.provenance["cache_entries"]
    }.items()))  # fmt: skip
    return replace(
        without,
        decision=decision,
        statistic=max(without.statistic, with_site.statistic),
        details={
            **without.details,
            "membership_strength": wider.details["membership_strength"],
            "membership_strength_upper": upper,
            "reason": reason,
            "site_images": n_site,
            # it stands only where both designs' "forgotten" stand
            "hidden_shift_tolerance": _tolerance(without, with_site),
            "designs": {"without_site": _design(without), "with_site": _design(with_site)},
        },
        provenance=provenance,
    )

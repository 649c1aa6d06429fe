"""The audit report's figures: what a compliance officer looks at beside the numbers.

Confidences are drawn on a logit scale, ``log(p / (1 - p))``, so values near 1.0 do not
bunch into one pixel; K-S distances are unchanged by that monotone transform.
"""

from __future__ import annotations

import numpy as np

from monai_forget.audit.result import AuditResult, bound_share

__all__ = ["FIGURES", "ema_figure", "ks_figure", "refmodel_figure", "tpr_at_fpr"]

_COLOURS = {"query": "#1f77b4", "members": "#d62728", "nonmembers": "#2ca02c"}


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def ks_figure(result: AuditResult):
    """ECDFs of the three confidence distributions on D_Q (Liu & Tsaftaris 2020, Fig. 2)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for key, name in [
        ("query_shadow_confidence", "query shadow (trained on D_Q)"),
        ("target_confidence", "target"),
        ("calibration_shadow_confidence", "calibration shadow (trained on D_C)"),
    ]:
        values = np.sort(_logit(result.arrays[key]))
        ax.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=name)
    ax.set_xlabel("confidence for the ground-truth class, t[y] (logit scale)")
    ax.set_ylabel("ECDF over D_Q")
    ax.set_title(f"rho_KS = {result.statistic:.3g} (forgotten when >= 1)")
    ax.legend(fontsize=8, loc="upper left")
    return fig


def ema_figure(result: AuditResult):
    """Histograms of each membership metric, query (target) vs calibration (reference),
    with the per-class thresholds drawn (dashed)."""
    import matplotlib.pyplot as plt

    metrics = result.provenance.get("options", {}).get("metrics") or [
        k.removeprefix("query_") for k in result.arrays if k.startswith("query_")
    ]
    thresholds = result.details.get("thresholds", {}).get("thresholds", {})
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.0), squeeze=False)
    groups = [("query_", "query (target)"), ("member_", "calibration members"),
              ("nonmember_", "calibration non-members")]  # fmt: skip
    for ax, metric in zip(axes[0], metrics, strict=True):
        scale = _logit if metric == "confidence" else (lambda v: np.asarray(v, dtype=float))
        present = [(p, name) for p, name in groups if p + metric in result.arrays]
        values = [scale(result.arrays[p + metric]) for p, _ in present]
        bins = np.histogram_bin_edges(np.concatenate(values), bins=30)
        for v, (_, name) in zip(values, present, strict=True):
            ax.hist(v, bins=bins, density=True, histtype="step", label=name)
        for t in np.unique(np.asarray(thresholds.get(metric, []), dtype=float)):
            if np.isfinite(t) and metric != "correctness":
                ax.axvline(float(scale(np.array([t]))[0]), color="black", lw=0.7, ls="--")
        suffix = " (logit)" if metric == "confidence" else ""
        ax.set_title(metric.replace("_", " ") + suffix, fontsize=9)
        ax.set_xlabel("score (higher = more member-like)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"rho_EMA = {result.statistic:.3g}; dashed: per-class thresholds", fontsize=10)
    return fig


def tpr_at_fpr(members: np.ndarray, nonmembers: np.ndarray, fprs=(0.01, 0.001)) -> dict:
    """TPR of "member iff score >= t" at the largest threshold keeping FPR <= each level."""
    from sklearn.metrics import roc_curve

    truth = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    fpr, tpr, _ = roc_curve(truth, np.r_[members, nonmembers])
    return {level: float(tpr[fpr <= level].max(initial=0.0)) for level in fprs}


def refmodel_figure(result: AuditResult):
    """Scores of D_Q against the known members and non-members, and the per-sample
    membership signal's ROC on the known sets (linear and log axes)."""
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    scores = {role: np.asarray(result.arrays[f"{role}_score"], float) for role in _COLOURS}
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    pooled = np.concatenate(list(scores.values()))
    bins = np.histogram_bin_edges(np.clip(pooled, *np.percentile(pooled, [1, 99])), bins=40)
    labels = {"query": "D_Q", "members": "known members", "nonmembers": "known non-members"}
    for role, values in scores.items():
        axes[0].hist(values, bins=bins, density=True, histtype="step", color=_COLOURS[role],
                     label=f"{labels[role]} (n={len(values)})")  # fmt: skip
    axes[0].set_xlabel("score vs reference models (higher = more member-like)")
    axes[0].set_ylabel("density (share of each set per unit score)")
    axes[0].legend(fontsize=7)
    truth = np.r_[np.ones(len(scores["members"])), np.zeros(len(scores["nonmembers"]))]
    fpr, tpr, _ = roc_curve(truth, np.r_[scores["members"], scores["nonmembers"]])
    low = tpr_at_fpr(scores["members"], scores["nonmembers"])
    for ax, log in ((axes[1], False), (axes[2], True)):
        ax.plot(fpr, tpr, color="black")
        ax.plot([1e-4, 1], [1e-4, 1], color="grey", lw=0.6, ls=":")
        ax.set_xlabel("false positive rate (known non-members)")
        ax.set_ylabel("true positive rate (known members)")
        if log:
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlim(1e-3, 1)
            ax.set_ylim(1e-3, 1)
            for level, value in low.items():
                ax.axvline(level, color="grey", lw=0.5, ls="--")
                ax.annotate(
                    f"TPR {value:.3f} @ FPR {level:g}", (level, max(value, 1.1e-3)), fontsize=7
                )
    details = result.details
    axes[1].set_title(
        f"membership signal, AUC {details.get('member_auc', float('nan')):.3f}", fontsize=9
    )
    axes[2].set_title("log scale (low false-alarm regime)", fontsize=9)
    upper = bound_share(details.get("membership_strength_upper", float("inf")))
    bound = "no bound" if upper is None else f"at most {upper} of the members'"
    fig.suptitle(
        f"p-value p_member = {result.statistic:.3g} (small: remembered); membership strength "
        f"{bound} (margin {details.get('margin', float('nan')):g}): {result.decision}",
        fontsize=10,
    )
    return fig


FIGURES = {"ks": ks_figure, "ema": ema_figure, "refmodel": refmodel_figure}

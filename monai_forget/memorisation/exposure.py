"""Canary exposure of a pipeline: at how many copies does it memorise burned-in text?

Carlini et al., "The Secret Sharer" (USENIX Security 2019), in images. A data team
plants random canaries, texts drawn uniformly from a stated randomness space R (e.g.
five capital letters), each into a known number of training images
(:mod:`monai_forget.dicom.plant`, ``canary inject --random-canaries``), trains its
pipeline, and ranks each planted canary among canaries of R that were never planted,
burned into the same probes at the same place and passed through the same preprocessing.

Carlini et al. rank by log-perplexity (lower = more memorised); a classifier has none, so
a canary is ranked by the leak scan's statistic (higher = more memorised: Eq. 1's M of
Hartley & Tsaftaris 2022, or the class shift, :mod:`~.statistics`). With n never-planted
canaries and ``rank = 1 + #{never-planted scoring at or above the canary}``:

    exposure = log2((n + 1) / rank)        (Def. 4, |R| and rank estimated by sampling)

which is at most log2(n + 1) bits. Beyond that, Sec. 4.3 fits a skew-normal to the
never-planted canaries' scores and extrapolates:

    exposure_extrapolated = -log2 P_{x ~ skew-normal}(x >= score of the canary).

Decisions use only the rank (exact under the null that a canary is exchangeable with
the never-planted ones: ``p = rank / (n + 1)``), corrected over the planted canaries;
the pipeline shows evidence of memorising burned-in text when any canary is flagged.
The extrapolated exposure describes, it does not decide: the fit is a model of the tail.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from monai_forget.canary.space import space_size, text_template
from monai_forget.defaults import EXPOSURE_STATISTIC
from monai_forget.memorisation.leak_scan import LeakScanConfig, default_decoys, leak_scan
from monai_forget.memorisation.scan_result import LeakScanResult
from monai_forget.reporting import pvalue_text
from monai_forget.results import Result

__all__ = [
    "CanaryExposure",
    "ExposureAudit",
    "TrainingCheck",
    "canary_exposure",
    "extrapolated_exposure",
    "planted_in_training",
]


@dataclass(frozen=True)
class TrainingCheck:
    """Whether the audited model's training set holds the planted files: a "no evidence"
    says something only of a model that trained on them.

    Attributes:
        planted: files the manifest records as carrying a canary.
        found: how many of them the training datalist holds (matched by content: the
            manifest's output SHA-256 against each listed image file's).
        datalist: the datalist file and the key read (e.g. ``training``).
    """

    planted: int
    found: int
    datalist: str

    @property
    def complete(self) -> bool:
        return self.planted > 0 and self.found == self.planted


def planted_in_training(
    manifest: str | Path, datalist: str | Path, key: str = "training"
) -> TrainingCheck:
    """Match the manifest's planted files against the images a MONAI datalist lists under
    ``key`` (relative paths from the datalist's folder, as MONAI reads them), by content.

    Raises:
        FileNotFoundError: no such manifest or datalist.
        ValueError: a datalist without ``key``, or a manifest that records no hash.
    """
    import hashlib
    import json

    from monai.data import load_decathlon_datalist

    records = json.loads(Path(manifest).read_text(encoding="utf-8"))["records"]
    planted = {r.get("output_sha256") for r in records if r.get("action") == "injected"}
    if not planted or None in planted or "" in planted:
        raise ValueError(f"{manifest} records no output hash of its canaries (a dry run?)")
    if not Path(datalist).is_file():
        raise FileNotFoundError(f"datalist {datalist} does not exist")
    try:
        entries = load_decathlon_datalist(str(datalist), data_list_key=key)
    except ValueError as err:
        raise ValueError(f"{datalist} has no {key!r} list ({err}); name the key the model "
                         "was trained on") from None  # fmt: skip
    listed = set()
    for entry in entries:
        images = entry["image"] if isinstance(entry["image"], list) else [entry["image"]]
        for image in images:
            if Path(image).is_file():
                listed.add(hashlib.sha256(Path(image).read_bytes()).hexdigest())
    return TrainingCheck(len(planted), len(planted & listed), f"{datalist} ({key})")


def extrapolated_exposure(score: float | np.ndarray, never_planted: object) -> float | np.ndarray:
    """Carlini et al. (2019) Sec. 4.3: ``-log2`` of the upper tail at ``score`` of a
    skew-normal fitted (maximum likelihood, :func:`scipy.stats.skewnorm.fit`) to the
    never-planted canaries' scores; ``inf`` where the tail underflows. ``score`` may be
    an array (one fit serves every canary).

    Raises:
        ValueError: fewer than 3 scores, or scores that do not vary.
    """
    from scipy import stats

    values = np.asarray(never_planted, dtype=np.float64).ravel()
    if values.size < 3 or np.ptp(values) == 0:
        raise ValueError("the skew-normal fit needs at least 3 never-planted scores that vary")
    shape, loc, scale = stats.skewnorm.fit(values)
    bits = -stats.skewnorm.logsf(np.asarray(score, dtype=np.float64), shape, loc, scale)
    bits = bits / math.log(2)
    return float(bits) if np.ndim(bits) == 0 else bits


@dataclass(frozen=True)
class CanaryExposure:
    """One planted canary's standing among the never-planted canaries.

    Attributes:
        text: the canary.
        copies: how many training images carried it.
        score: its statistic (M or class shift, see :mod:`~.statistics`).
        rank: ``1 + #never-planted canaries scoring at or above it``.
        n_never_planted: how many never-planted canaries it was ranked among.
        exposure: ``log2((n + 1) / rank)`` bits.
        exposure_extrapolated: the skew-normal extrapolation (Sec. 4.3), in bits; NaN
            when the never-planted canaries all score the same (nothing to fit).
        pvalue: ``rank / (n + 1)``.
        pvalue_adjusted: corrected over the planted canaries.
        significant: ``pvalue_adjusted < alpha``.
    """

    text: str
    copies: int
    score: float
    rank: int
    n_never_planted: int
    exposure: float
    exposure_extrapolated: float
    pvalue: float
    pvalue_adjusted: float
    significant: bool


@dataclass(frozen=True)
class ExposureAudit(Result):
    """Every planted canary's exposure, and the pipeline's verdict.

    Attributes:
        canaries: one row per planted canary, by copies then exposure (largest first).
        space: the randomness space's template (e.g. ``"AAAAA"``).
        space_size: how many texts it holds.
        scan: the leak scan that ranked the canaries (settings, provenance, the
            never-planted canaries and their scores).
        training: whether the model's training datalist holds the planted files
            (:func:`planted_in_training`); without it, no canary flagged reads "cannot
            tell", never "no evidence".
    """

    canaries: tuple[CanaryExposure, ...]
    space: str
    space_size: int
    scan: LeakScanResult = field(repr=False)
    training: TrainingCheck | None = None

    @property
    def alpha(self) -> float:
        return self.scan.alpha

    @property
    def memorised(self) -> bool:
        """Whether any planted canary is flagged: evidence of memorising burned-in text."""
        return any(c.significant for c in self.canaries)

    def flagged_copies(self) -> list[int]:
        """The copy counts at which at least one canary is flagged, ascending."""
        return sorted({c.copies for c in self.canaries if c.significant})

    def by_copies(self) -> dict[int, list[CanaryExposure]]:
        """The canaries grouped by copies, ascending."""
        out: dict[int, list[CanaryExposure]] = {}
        for c in sorted(self.canaries, key=lambda c: c.copies):
            out.setdefault(c.copies, []).append(c)
        return out

    def verdict(self) -> str:
        """The pipeline's finding in one sentence."""
        n, stat = len(self.canaries), self.scan.settings.get("statistic", "m")
        lead = (
            f"{n} planted canar{'y' if n == 1 else 'ies'} from a space of "
            f"{self.space_size:,} texts ({self.space}), ranked by {stat} among "
            f"{self.canaries[0].n_never_planted} never-planted ones"
        )
        if not self.memorised:
            level = f"({self.scan.correction}-adjusted, alpha {self.alpha:g})"
            if self.training is None:
                return (
                    f"{lead}: no canary flagged {level}, but the audit cannot tell whether "
                    "the pipeline memorises burned-in text: nothing shows that the model "
                    "trained on the planted files (give the datalist it was trained on)"
                )
            if not self.training.complete:
                return (
                    f"{lead}: no canary flagged {level}, but the audit cannot tell whether "
                    f"the pipeline memorises burned-in text: the training datalist "
                    f"{self.training.datalist} holds {self.training.found} of the "
                    f"{self.training.planted} planted files"
                )
            return (
                f"{lead}: no evidence that the pipeline memorises burned-in text at these "
                f"copy counts {level}; the training datalist holds all "
                f"{self.training.planted} planted files"
            )
        copies = ", ".join(str(c) for c in self.flagged_copies())
        return (
            f"{lead}: evidence that the pipeline memorises burned-in text, at {copies} "
            f"cop{'y' if copies == '1' else 'ies'} ({self.scan.correction}-adjusted, "
            f"alpha {self.alpha:g})"
        )

    def summary(self) -> str:
        """The verdict and a table, one row per canary."""
        lines = [
            self.verdict(),
            f"{'copies':>6}  {'canary':12s} {'exposure':>8} {'extrap.':>8} {'rank':>6} "
            f"{'p':>9} {'p adj':>9}",
        ]
        for group in self.by_copies().values():
            for c in group:
                p, p_adj = (pvalue_text(v, self.alpha) for v in (c.pvalue, c.pvalue_adjusted))
                lines.append(
                    f"{c.copies:6d}  {c.text:12s} {c.exposure:8.2f} "
                    f"{c.exposure_extrapolated:8.2f} {c.rank:6d} {p:>9} {p_adj:>9}"
                    + (" *" if c.significant else "")
                )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        scan = self.scan.to_dict()
        return {
            "method": "canary exposure (Carlini et al. 2019, Def. 4 by sampling; Sec. 4.3 "
            "skew-normal extrapolation) with a leak scan's statistic",
            "verdict": self.verdict(),
            "memorised": self.memorised,
            "training": None if self.training is None else dataclasses.asdict(self.training),
            "flagged_copies": self.flagged_copies(),
            "space": self.space,
            "space_size": self.space_size,
            "alpha": self.alpha,
            "correction": self.scan.correction,
            "canaries": [dataclasses.asdict(c) for c in self.canaries],
            "never_planted": scan["decoys"],
            "settings": scan["settings"],
            "provenance": scan["provenance"],
        }


def canary_exposure(
    model: torch.nn.Module,
    probes: object,
    canaries: Mapping[str, int],
    config: LeakScanConfig | None = None,
    *,
    training: TrainingCheck | None = None,
    progress: bool = False,
) -> ExposureAudit:
    """Rank every planted canary among never-planted canaries of its space.

    Args:
        model: the trained classifier (black box).
        probes: out-of-distribution probes, on the model grid or as
            :class:`~.pipeline.PipelineProbes` (canaries burned at acquisition resolution
            and passed through the model's preprocessing).
        canaries: each planted text with its copy count (e.g.
            :func:`monai_forget.dicom.manifest.manifest_canaries`); all of one space.
        config: placement, statistic, never-planted count (``decoys``), correction and
            alpha as for :func:`~.leak_scan.leak_scan` (a statistic left unset is the
            class shift, :data:`~monai_forget.defaults.EXPOSURE_STATISTIC`); the
            never-planted canaries are always random texts of the space, and flags are not
            attributed.
        training: whether the model trained on the planted files
            (:func:`planted_in_training`); needed for a "no evidence".

    Raises:
        ValueError: no canary, canaries of different spaces, or copy counts below 1.
    """
    if not canaries:
        raise ValueError("no planted canary; plant some with canary inject --random-canaries")
    spaces = {text_template(t) for t in canaries}
    if len(spaces) > 1:
        raise ValueError(
            f"the canaries come from {len(spaces)} spaces ({', '.join(sorted(spaces))}); "
            "audit one space at a time"
        )
    if min(canaries.values()) < 1:
        raise ValueError("every planted canary needs a copy count of at least 1")
    config = config or LeakScanConfig()
    # Carlini et al.'s exposure is a rank among a fixed sample of never-planted canaries:
    # a fixed number, never the leak scan's sequential decoys.
    fixed = config.decoys or default_decoys(len(canaries), config.alpha, config.correction)
    config = dataclasses.replace(
        config,
        statistic=config.statistic or EXPOSURE_STATISTIC,  # unless the caller chose one
        decoy_source="letters",
        attribution=False,
        decoys=fixed,
        max_decoys=None,
    )
    texts = list(canaries)
    scan = leak_scan(model, probes, texts, config, progress=progress)
    never = scan.nulls[0].m
    scores = np.array([r.m for r in scan.rows])
    varies = never.size >= 3 and np.ptp(never) > 0  # a model blind to the box has no tail
    tails = extrapolated_exposure(scores, never) if varies else np.full(len(scores), math.nan)
    rows = [
        CanaryExposure(
            text=r.name,
            copies=int(canaries[r.name]),
            score=r.m,
            rank=r.decoys_at_or_above + 1,
            n_never_planted=r.n_decoys,
            exposure=r.exposure,
            exposure_extrapolated=float(tail),
            pvalue=r.pvalue,
            pvalue_adjusted=r.pvalue_adjusted,
            significant=r.significant,
        )
        for r, tail in zip(scan.rows, tails, strict=True)
    ]
    rows.sort(key=lambda c: (c.copies, -c.exposure, c.text))
    (space,) = spaces
    return ExposureAudit(tuple(rows), space, space_size(space), scan, training)

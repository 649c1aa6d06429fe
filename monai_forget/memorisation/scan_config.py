"""The leak scan's settings: how names are drawn, decoys drawn, tested and corrected
(:class:`LeakScanConfig`, checked when built), and the fixed decoy count that lets one
name reach alpha (:func:`default_decoys`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from monai_forget.canary.lettering import Lettering, TrueTypeLettering, as_lettering
from monai_forget.checks import COUNT, check_choice, check_fraction, check_in
from monai_forget.defaults import LEAK_SCAN_ALPHA, LEAK_SCAN_CORRECTIONS, LEAK_SCAN_DECOY_SOURCES
from monai_forget.memorisation.sequential import EXCEEDANCES
from monai_forget.memorisation.settings import ProbeSettings
from monai_forget.memorisation.statistics import STATISTICS, Statistic

__all__ = ["CORRECTIONS", "LeakScanConfig", "default_decoys", "drawn_with", "truetype"]

#: Multiple-testing corrections: Benjamini-Hochberg (false discovery rate, default),
#: Bonferroni (family-wise error), or none.
CORRECTIONS = LEAK_SCAN_CORRECTIONS
Correction = Literal["bh", "bonferroni", "none"]
DecoySource = Literal["letters", "names"]


def default_decoys(n_names: int, alpha: float, correction: str) -> int:
    """Decoys per kind of name so that one leaked name can be flagged: at least 999.

    The smallest calibrated p is 1 / (n + 1); after BH or Bonferroni over m names a
    single leaked name is flagged only if m / (n + 1) < alpha, so n >= m / alpha.
    """
    tests = n_names if correction in ("bh", "bonferroni") else 1
    return max(999, math.floor(tests / alpha))


@dataclass(frozen=True)
class LeakScanConfig(ProbeSettings):
    """How a leak scan renders the names, draws the decoys, tests and runs the model: the
    :class:`~monai_forget.memorisation.ProbeSettings` a memorisation score takes (test,
    random controls, seed, how the model runs), and what a scan adds.

    Args:
        position: ``(row, col)`` where burned-in text would start.
        scale: glyph scale of the text (the 5x5 typeface).
        font, font_size: a TrueType font and its size in pixels instead of the 5x5
            typeface, anti-aliased as the injector burns it
            (:mod:`~monai_forget.canary.lettering`); scanned through a pipeline only
            (``probes`` as :class:`~.pipeline.PipelineProbes`), with ``"patch"`` or
            ``"ink"`` random controls, without attribution.
        value: pixel value of the text, or ``"max"`` (each probe's white).
        decoys: a fixed number of decoys per kind of name (length and letter case),
            every name ranked among all of them. Default (``None``): sequential decoys
            (:mod:`~monai_forget.memorisation.sequential`): each kind's decoys are scored
            in a random order until every name of it has ``exceedances`` decoys at or
            above it, up to ``max_decoys``; each name's p is Besag & Clifford's
            sequential p-value, and an unflagged name is "no evidence" or "undecided".
            Scans with reference models take a fixed number (default
            :func:`default_decoys`: at least 999, enough for one name to reach alpha).
        max_decoys: the sequential decoys' cap per kind of name; default twice
            :func:`default_decoys` (so a scan costs at most twice the fixed default).
        exceedances: h of the sequential p-value (decoys at or above a name after which
            its p-value is fixed).
        decoy_seed: seed of the decoys; default a fresh one, recorded in the result.
        decoy_source: ``"names"`` (default: real given and family names of the same
            lengths and case, :mod:`~monai_forget.memorisation.name_decoys`) or
            ``"letters"`` (random letters of the name's kind). Names are the default
            because they kept the measured false alarms within 5 % where random letters
            did not (18 of 100 MNIST MLP-1 control scans flagged a name; docs/memorisation.md).
        correction: ``"bh"`` (Benjamini-Hochberg, default), ``"bonferroni"`` or ``"none"``.
        alpha: level for the adjusted calibrated p-values.
        statistic: what each text is ranked by among its decoys: ``"m"`` (Eq. 1's M, the
            paper's) or ``"class-shift"`` (the rise in log-probability of the class the
            text raises most, less its random control's; a departure, see
            :mod:`~monai_forget.memorisation.statistics`). Default (``None``): the class
            shift through a pipeline (:data:`~monai_forget.defaults.PIPELINE_STATISTIC`,
            whose control scans met the false-alarm target where M's did not), M on the
            model grid (measured on more data sets and networks).
        attribution: when several names are flagged, test each against its likeness to
            every other (:mod:`~monai_forget.memorisation.attribution`), so
            names flagged only for looking like a leaked name are told apart (not run on
            scans with reference models).
        test, random_feature, seed, batch_size, device, outputs: as
            :class:`ProbeSettings`'s (the test is the uncalibrated one reported beside; the
            names of one kind and their decoys share their random controls; the texts
            are stamped in groups of about 32 MB whatever the batch).

    Raises:
        ValueError: an unknown test, random feature, kind of output or correction, alpha
            outside (0, 1), or fewer than one decoy.
    """

    position: tuple[int, int] = (1, 1)
    scale: int = 1
    font: str | None = None
    font_size: int | None = None
    value: float | str = 1.0
    decoys: int | None = None
    max_decoys: int | None = None
    exceedances: int = EXCEEDANCES
    decoy_seed: int | None = None
    decoy_source: DecoySource = LEAK_SCAN_DECOY_SOURCES[0]
    correction: Correction = "bh"
    alpha: float = LEAK_SCAN_ALPHA
    statistic: Statistic | None = None
    attribution: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("correction", self.correction, CORRECTIONS)
        check_fraction("alpha", self.alpha)
        check_choice("decoy_source", self.decoy_source, LEAK_SCAN_DECOY_SOURCES)
        for name in ("decoys", "max_decoys", "exceedances"):
            if getattr(self, name) is not None:
                check_in(name, getattr(self, name), COUNT)
        if self.decoys is not None and self.max_decoys is not None:
            raise ValueError(
                "decoys (a fixed number) and max_decoys (the sequential decoys' cap) exclude "
                "each other: give one"
            )
        if self.statistic is not None:
            check_choice("statistic", self.statistic, STATISTICS)
        object.__setattr__(self, "position", tuple(int(p) for p in self.position))
        if self.font is not None and self.random_feature == "text":
            raise ValueError(
                "random-text controls are drawn in the 5x5 typeface; with a font use the "
                "patch or ink controls"
            )
        self.lettering  # noqa: B018  (an unknown font or a bad size is refused here)

    @property
    def lettering(self) -> Lettering:
        """How texts are drawn: the 5x5 typeface at ``scale`` or the TrueType font."""
        return as_lettering(self.scale, self.font, self.font_size)

    def sequential(self, n_references: int = 0) -> bool:
        """Whether decoys are drawn sequentially (no fixed number, no reference models)."""
        return self.decoys is None and n_references == 0

    def decoys_for(self, n_names: int, n_references: int = 0) -> int:
        """Decoys drawn per kind of name for a roster of ``n_names``: the fixed number, or
        the sequential decoys' cap."""
        if self.decoys is not None:
            return int(self.decoys)
        fixed = default_decoys(n_names, self.alpha, self.correction)
        if not self.sequential(n_references):
            return fixed
        return int(self.max_decoys) if self.max_decoys is not None else 2 * fixed


def truetype(config: LeakScanConfig) -> bool:
    return isinstance(config.lettering, TrueTypeLettering)


def drawn_with(config: LeakScanConfig) -> int | Lettering:
    """What the passes draw texts with: the TrueType lettering, or the 5x5 scale."""
    return config.lettering if truetype(config) else config.scale

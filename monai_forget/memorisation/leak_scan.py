"""Leak scan: which of a roster of patient names has a model memorised?

A de-identification audit knows where burned-in text would sit on the images (position),
how it would look (the typeface and scale of the scanner's annotation) and whose names
could have leaked (a CSV roster), but not whether any did. For every candidate name the
scan computes the black-box score M (Hartley & Tsaftaris 2022, Eq. 1) with its
one-tailed test on the same out-of-distribution probes, corrects the p-values for the
number of names (Benjamini-Hochberg by default, Bonferroni as an option) and ranks the
names. The outputs on the clean probes are computed once and shared by every name, so a
scan of m names costs 1 + 2m batched passes over the probes.
"""

from __future__ import annotations

import csv
import os
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from monai_forget.canary import text_shape, unsupported_characters
from monai_forget.canary.font import TYPEFACE
from monai_forget.defaults import LEAK_SCAN_CORRECTIONS
from monai_forget.memorisation.feature import (
    RandomFeature,
    UniqueFeature,
    as_probe_images,
    warn_if_in_distribution,
)
from monai_forget.memorisation.score import _predict, compute_m_score, probe_outputs
from monai_forget.memorisation.significance import PAPER_TEST, TESTS
from monai_forget.results import Result, package_versions
from monai_forget.stats import benjamini_hochberg, bonferroni

__all__ = ["CORRECTIONS", "LeakScanResult", "NameResult", "leak_scan", "read_roster"]

#: Multiple-testing corrections: Benjamini-Hochberg (false discovery rate, default),
#: Bonferroni (family-wise error), or none.
CORRECTIONS = LEAK_SCAN_CORRECTIONS
Correction = Literal["bh", "bonferroni", "none"]


@dataclass(frozen=True)
class NameResult:
    """One candidate name's score, test and standing in the scan."""

    rank: int
    name: str
    m: float
    statistic: float
    pvalue: float
    pvalue_adjusted: float
    significant: bool
    mean_d_unique: float
    mean_d_random: float


@dataclass(frozen=True)
class LeakScanResult(Result):
    """The ranked scan. Rows are sorted by p-value (ties: larger M first).

    Attributes:
        rows: one :class:`NameResult` per name, best-ranked first.
        test: the one-tailed test used.
        correction: ``"bh"``, ``"bonferroni"`` or ``"none"``.
        alpha: level at which an adjusted p-value counts as significant.
        n_probes: number of probes.
        settings: feature placement and controls (position, scale, value, typeface...).
        provenance: model and probe fingerprints, package versions, seed.
    """

    rows: tuple[NameResult, ...]
    test: str
    correction: str
    alpha: float
    n_probes: int
    settings: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def top(self) -> NameResult:
        """The best-ranked name."""
        return self.rows[0]

    def significant_names(self) -> list[str]:
        """Names whose adjusted p-value is below ``alpha``, in rank order."""
        return [r.name for r in self.rows if r.significant]

    def rank_of(self, name: str) -> int:
        """The rank (1 = first) of ``name``."""
        for r in self.rows:
            if r.name == name:
                return r.rank
        raise KeyError(f"{name!r} was not scanned")

    def summary(self, top: int = 10) -> str:
        """A plain-text table of the ``top`` best-ranked names."""
        sig = self.significant_names()
        head = (
            f"leak scan of {len(self.rows)} names on {self.n_probes} probes; {self.test} "
            f"test, {self.correction} correction, alpha {self.alpha}: "
            + (
                f"{len(sig)} significant ({', '.join(sig[:5])}"
                + (", ..." if len(sig) > 5 else "")
                + ")"
                if sig
                else "no name significant"
            )
        )
        lines = [head, f"{'rank':>4}  {'name':20s} {'M':>11} {'p':>10} {'p adj':>10}"]
        for r in self.rows[:top]:
            mark = " *" if r.significant else ""
            lines.append(
                f"{r.rank:4d}  {r.name:20s} {r.m:11.4g} {r.pvalue:10.3g} "
                f"{r.pvalue_adjusted:10.3g}{mark}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly record."""
        return {
            "method": "unique-feature memorisation leak scan (Hartley & Tsaftaris 2022, Eq. 1)",
            "test": self.test,
            "correction": self.correction,
            "alpha": self.alpha,
            "n_probes": self.n_probes,
            "settings": self.settings,
            "provenance": self.provenance,
            "significant": self.significant_names(),
            "rows": [asdict(r) for r in self.rows],
        }


def read_roster(path: str | os.PathLike, column: str | None = None) -> list[str]:
    """Candidate names from a CSV roster.

    The file has a header row. ``column`` names the column to read (matched
    case-insensitively); by default the ``name`` column, or the only column of a
    one-column file. Blank cells are skipped; surrounding whitespace is removed.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: no such column, or no names.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"roster {path} does not exist")
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        fields = [c for c in (reader.fieldnames or []) if c is not None]
        lookup = {c.strip().lower(): c for c in fields}
        if column is not None:
            key = lookup.get(column.strip().lower())
        elif "name" in lookup:
            key = lookup["name"]
        elif len(fields) == 1:
            key = fields[0]
        else:
            key = None
        if key is None:  # the header is not shown: the file may not be a roster at all
            raise ValueError(
                f"roster {path}, line 1: {len(fields)} column(s) and none is 'name'; pass the "
                "column holding the names (CLI: --column), or add a 'name' header"
            )
        rows = [(reader.line_num, (row.get(key) or "").strip()) for row in reader]
    names = Roster(n for _, n in rows if n)
    if not names:
        raise ValueError(f"roster {path} has no names in column {key!r}")
    names.where = [f"{path} line {line}" for line, n in rows if n]
    return names


class Roster(list):
    """Names read from a roster file; ``where[i]`` is the file and line of name ``i``, so
    errors name lines rather than repeat the names."""

    where: list[str]


def _shown(names: Sequence[str], chosen: Sequence[str], limit: int = 3) -> str:
    """The chosen names, or their file and lines when they came from a roster file."""
    where = getattr(names, "where", None)
    if where is None:
        return str(list(chosen[:limit]))
    lines = [where[i] for i, n in enumerate(names) if n in set(chosen)]
    return ", ".join(lines[:limit]) + (f", ... ({len(lines)} in all)" if len(lines) > limit else "")


def _check_names(names: Sequence[str], position: Sequence[int], scale: int, image_hw) -> list[str]:
    given = names
    names = [str(n).strip() for n in names]
    if not names or not all(names):
        raise ValueError("the roster must hold at least one non-empty name")
    dup = sorted(n for n, c in Counter(names).items() if c > 1)
    if dup:
        if hasattr(given, "where"):
            raise ValueError(
                f"the roster repeats names ({_shown(given, dup, limit=6)}); remove the duplicates"
            )
        raise ValueError(f"the roster lists {dup[:5]} more than once; remove the duplicates")
    bad = [n for n in names if unsupported_characters(n)]
    if bad:
        chars = sorted({c for n in bad for c in unsupported_characters(n)})
        raise ValueError(
            f"{len(bad)} name(s) use characters outside the {TYPEFACE} typeface "
            f"(e.g. {_shown(given, bad)}; characters {chars}); transliterate them or drop them"
        )
    row, col = (int(p) for p in position)
    rows, cols = image_hw
    too_long = []
    for n in names:
        h, w = text_shape(len(n), scale)
        if row < 0 or col < 0 or row + h > rows or col + w > cols:
            too_long.append(n)
    if too_long:
        fit = max(1, (cols - col + 1) // (6 * scale))
        raise ValueError(
            f"{len(too_long)} name(s) do not fit {rows}x{cols} probes at (row {row}, col "
            f"{col}) with scale {scale} (e.g. {_shown(given, too_long)}); at most {fit} characters "
            "fit: use a smaller scale, another position, or larger probes"
        )
    return names


def _name_seed(seed: int, name: str) -> np.random.Generator:
    """Random controls keyed by the name, so a name's result does not depend on roster order."""
    return np.random.default_rng([int(seed), zlib.crc32(name.encode("utf-8"))])


def leak_scan(
    model: torch.nn.Module,
    probes: object,
    names: Sequence[str],
    *,
    position: Sequence[int] = (1, 1),
    scale: int = 1,
    value: float | str = 1.0,
    test: str = PAPER_TEST,
    correction: Correction = "bh",
    alpha: float = 0.05,
    random_feature: RandomFeature = "patch",
    seed: int = 0,
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    outputs: Literal["logits", "probs"] = "logits",
    training_data: object | None = None,
    progress: bool = False,
) -> LeakScanResult:
    """Score every candidate name, correct for multiple testing and rank.

    Args:
        model: the audited classifier (black box: only outputs are used).
        probes: out-of-distribution probe set D_c ``(N, C, H, W)``.
        names: candidate names (e.g. from :func:`read_roster`).
        position: ``(row, col)`` where burned-in text would start.
        scale: glyph scale of the text.
        value: pixel value of the text, or ``"max"`` (each probe's white).
        test: one-tailed test (:data:`~monai_forget.memorisation.TESTS`; default the
            paper's Student t-test).
        correction: ``"bh"`` (Benjamini-Hochberg, default), ``"bonferroni"`` or ``"none"``.
        alpha: significance level for the adjusted p-values.
        random_feature: ``"patch"`` (paper) or ``"text"`` random controls.
        seed: seed of the random controls (each name's stream is keyed by the name).
        batch_size, device, outputs: see :func:`monai_forget.inference.predict`.
        training_data: in-distribution samples; warns about probes identical to them.
        progress: show a progress bar over the names.

    Raises:
        ValueError: bad names (duplicates, characters outside the typeface, too long for
            the probes), a bad test/correction/alpha, or bad probes.
    """
    from tqdm.auto import tqdm

    from monai_forget.data import LabelledImages
    from monai_forget.fingerprint import data_fingerprint, model_fingerprint

    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose from {TESTS}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose from {CORRECTIONS}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    images = as_probe_images(probes)
    names = _check_names(names, position, scale, images.shape[-2:])
    if training_data is not None:
        warn_if_in_distribution(images, training_data)
    kwargs = dict(batch_size=batch_size, device=device, outputs=outputs)
    clean = _predict(model, images, "clean", **kwargs)
    scores = []
    for name in tqdm(names, desc="leak scan", unit="name", disable=not progress):
        feature = UniqueFeature.from_text(name, position, scale, value)
        pc, pu, pr = probe_outputs(
            model,
            images,
            feature,
            random_feature=random_feature,
            seed=_name_seed(seed, name),
            clean_probs=clean,
            **kwargs,
        )
        scores.append(compute_m_score(pc, pu, pr, test=test, tests=(test,)))
    pvalues = np.array([s.pvalue for s in scores])
    if correction == "bh":
        adjusted = benjamini_hochberg(pvalues)
    elif correction == "bonferroni":
        adjusted = bonferroni(pvalues)
    else:
        adjusted = pvalues.copy()
    m = np.array([s.m for s in scores])
    order = np.lexsort((-m, pvalues))  # by p, then larger M first
    rows = tuple(
        NameResult(
            rank=rank,
            name=names[i],
            m=float(m[i]),
            statistic=float(scores[i].statistic),
            pvalue=float(pvalues[i]),
            pvalue_adjusted=float(adjusted[i]),
            significant=bool(adjusted[i] < alpha),
            mean_d_unique=float(scores[i].mean_d_unique),
            mean_d_random=float(scores[i].mean_d_random),
        )
        for rank, i in enumerate(order, start=1)
    )
    probe_set = LabelledImages(images, np.zeros(len(images), dtype=np.int64), num_classes=1)
    settings = {
        "position": [int(p) for p in position],
        "scale": int(scale),
        "value": value,
        "typeface": TYPEFACE,
        "random_feature": random_feature,
    }
    provenance = {
        "model_fingerprint": model_fingerprint(model),
        "probes_fingerprint": data_fingerprint(probe_set),
        "seed": int(seed),
        "versions": package_versions(),
    }
    return LeakScanResult(rows, test, correction, float(alpha), len(images), settings, provenance)

"""The black-box unique-feature memorisation score M (Hartley & Tsaftaris 2022, Eq. 1).

Setting (Sec. 2.3): the auditor knows the unique feature z_u (its text, typeface and
place) but has neither the training data, nor the weights, nor z_u's label. It queries
the model f on an out-of-distribution probe set D_c = {x_c^i} and on two modified
copies: D_u, each probe carrying z_u, and D_r, each probe carrying a fresh random
feature z_r of the same size. With

    d_u^i = KL(f(x_c^i) || f(x_u^i)),    d_r^i = KL(f(x_c^i) || f(x_r^i)),

the score is Eq. 1,

    M = (1/n) sum_i d_u^i - (1/n) sum_i d_r^i,

and a one-tailed test of mean(d_u) > mean(d_r) decides whether M is significantly
positive (:mod:`~monai_forget.memorisation.significance`). A model that memorised z_u
reacts to it more than to a random pattern of the same size on images it never saw.

Cost: three batched forward passes over the n probes (clean, with z_u, with z_r), via
:func:`monai_forget.inference.predict`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from monai_forget.checks import check_choice, check_fraction
from monai_forget.defaults import MEMORISATION_ALPHA
from monai_forget.memorisation.decoys import DecoyTest, decoy_test, feature_decoys, fresh_seed
from monai_forget.memorisation.feature import (
    UniqueFeature,
    as_probe_images,
    warn_if_in_distribution,
)
from monai_forget.memorisation.passes import (
    FeatureCarrying,
    predict_probs,
    probe_set,
    text_divergences,
)
from monai_forget.memorisation.reference_scan import MIN_REFERENCES
from monai_forget.memorisation.reference_test import ReferenceTest, reference_test
from monai_forget.memorisation.settings import ProbeSettings
from monai_forget.memorisation.significance import (
    PAPER_TEST,
    TESTS,
    OneTailedResult,
    one_tailed_test,
)
from monai_forget.results import Result
from monai_forget.scores import check_probabilities
from monai_forget.stats import kl_divergence

__all__ = [
    "MemorisationScore",
    "compute_m_score",
    "m_score_from_divergences",
    "memorisation_score",
    "probe_outputs",
]


@dataclass(frozen=True)
class MemorisationScore(Result):
    """M (Eq. 1 of Hartley & Tsaftaris 2022) and its one-tailed tests.

    Attributes:
        m: ``mean(d_u) - mean(d_r)`` in nats.
        mean_d_unique: mean KL divergence caused by z_u.
        mean_d_random: mean KL divergence caused by the random features z_r.
        n: number of probes.
        tests: ``{test name: OneTailedResult(statistic, pvalue, df)}`` for every test run.
        test: the primary test, whose p-value is :attr:`pvalue` (default: the paper's).
        d_unique: per-probe d_u^i (float64).
        d_random: per-probe d_r^i (float64).
        calibrated: M ranked among decoys (:class:`DecoyTest`) when decoys were scored.
        decoy_seed: the seed the decoys were drawn with (to reproduce them).
        reference: M against reference models (:class:`ReferenceTest`) when given.
    """

    m: float
    mean_d_unique: float
    mean_d_random: float
    n: int
    tests: dict[str, OneTailedResult]
    test: str = PAPER_TEST
    d_unique: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    d_random: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)
    calibrated: DecoyTest | None = None
    decoy_seed: int | None = None
    reference: ReferenceTest | None = None

    @property
    def pvalue(self) -> float:
        """One-tailed p-value of the primary test."""
        return self.tests[self.test].pvalue

    @property
    def statistic(self) -> float:
        """Statistic of the primary test."""
        return self.tests[self.test].statistic

    @property
    def deciding_pvalue(self) -> float:
        """The p-value of the strongest evidence the score holds: against reference models
        when they were given, else calibrated on decoys when decoys were scored, else the
        primary (uncalibrated) test's."""
        if self.reference is not None:
            return self.reference.pvalue
        if self.calibrated is not None:
            return self.calibrated.pvalue
        return self.pvalue

    def evidence(self) -> str:
        """Which test decides and its p-value, in words (:attr:`deciding_pvalue`)."""
        if self.reference is not None:
            return f"p = {self.reference.pvalue:.4g} against {self.reference.n} reference models"
        if self.calibrated is not None:
            return f"calibrated p = {self.calibrated.pvalue:.4g} against decoys"
        return f"{self.test} p = {self.pvalue:.4g}"

    def significant(self, alpha: float = MEMORISATION_ALPHA) -> bool:
        """Whether the deciding test (:attr:`deciding_pvalue`) rejects "no memorisation" at
        level ``alpha``: the command line's verdict is this one."""
        return self.deciding_pvalue < check_fraction("alpha", alpha)

    def summary(self) -> str:
        """One line per test: M, statistic and p."""
        lines = [
            f"M = {self.m:.6g} nats (mean d_u {self.mean_d_unique:.6g}, mean d_r "
            f"{self.mean_d_random:.6g}, n = {self.n} probes)"
        ]
        for name, res in self.tests.items():
            mark = " (paper's test)" if name == PAPER_TEST else ""
            lines.append(f"  {name:9s} statistic {res.statistic:10.4g}  p = {res.pvalue:.4g}{mark}")
        if self.calibrated is not None:
            lines.append(f"  {self.calibrated.summary()} (decoy seed {self.decoy_seed})")
        if self.reference is not None:
            lines.append(f"  {self.reference.summary()}")
        return "\n".join(lines)

    def to_dict(self, per_probe: bool = False) -> dict[str, Any]:
        """JSON-friendly record; ``per_probe`` adds the d_u / d_r arrays."""
        out: dict[str, Any] = {
            "m": self.m,
            "mean_d_unique": self.mean_d_unique,
            "mean_d_random": self.mean_d_random,
            "n": self.n,
            "test": self.test,
            "pvalue": self.pvalue,
            "tests": {
                k: {"statistic": v.statistic, "pvalue": v.pvalue, "df": v.df}
                for k, v in self.tests.items()
            },
        }
        if self.calibrated is not None:
            out["calibrated"] = {
                **self.calibrated.to_dict(decoys=per_probe),
                "decoy_seed": self.decoy_seed,
            }
        if self.reference is not None:
            out["reference"] = self.reference.to_dict()
        if per_probe:
            out["d_unique"] = self.d_unique.tolist()
            out["d_random"] = self.d_random.tolist()
        return out


def _check_tests(tests: Sequence[str] | None, test: str) -> tuple[str, ...]:
    names = tuple(TESTS if tests is None else tests)
    for name in (*names, test):
        check_choice("test", name, TESTS)
    if test not in names:
        names = (test, *names)
    return names


def m_score_from_divergences(
    d_unique: object,
    d_random: object,
    *,
    test: str = PAPER_TEST,
    tests: Sequence[str] | None = None,
) -> MemorisationScore:
    """M (Eq. 1) and the one-tailed tests from per-probe divergences.

    Args:
        d_unique: d_u^i, one per probe.
        d_random: d_r^i, one per probe, same order.
        test: primary test (default ``"student"``, the paper's).
        tests: tests to run (default: all of :data:`~monai_forget.memorisation.TESTS`).
    """
    du = np.array(d_unique, dtype=np.float64, copy=True).ravel()
    dr = np.array(d_random, dtype=np.float64, copy=True).ravel()
    names = _check_tests(tests, test)
    results = {name: one_tailed_test(du, dr, name) for name in names}
    du.flags.writeable = False
    dr.flags.writeable = False
    mean_u, mean_r = float(du.mean()), float(dr.mean())
    return MemorisationScore(
        m=mean_u - mean_r,
        mean_d_unique=mean_u,
        mean_d_random=mean_r,
        n=int(du.size),
        tests=results,
        test=test,
        d_unique=du,
        d_random=dr,
    )


def compute_m_score(
    p_clean: object,
    p_unique: object,
    p_random: object,
    *,
    from_logits: bool = False,
    test: str = PAPER_TEST,
    tests: Sequence[str] | None = None,
) -> MemorisationScore:
    """M of Hartley & Tsaftaris (2022), Eq. 1, from the model's outputs on D_c, D_u, D_r.

    Row ``i`` of each array is the output on probe ``i``: clean, with z_u, with z_r.
    ``d_u^i = KL(p_clean^i || p_unique^i)`` and ``d_r^i = KL(p_clean^i || p_random^i)``
    (natural log, :func:`monai_forget.stats.kl_divergence`).

    Args:
        p_clean: ``(n, K)`` probabilities on the clean probes (logits with ``from_logits``).
        p_unique: ``(n, K)`` on the probes with the unique feature.
        p_random: ``(n, K)`` on the probes with random features.
        from_logits: apply a softmax to each first.
        test: primary test; ``tests``: the tests to run (default all).

    Raises:
        ValueError: outputs that are not probability vectors (suggesting
            ``from_logits``), shape mismatches, or fewer than 2 probes.
    """
    arrays = []
    for name, arr in (("p_clean", p_clean), ("p_unique", p_unique), ("p_random", p_random)):
        try:
            probs, _ = check_probabilities(arr, from_logits=from_logits)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None
        arrays.append(probs)
    pc, pu, pr = arrays
    if not (pc.shape == pu.shape == pr.shape):
        raise ValueError(
            f"the three outputs must have the same shape (n probes, K classes); got "
            f"{pc.shape}, {pu.shape}, {pr.shape}"
        )
    if pc.shape[0] < 2:
        raise ValueError(f"at least 2 probes are needed for the test, got {pc.shape[0]}")
    return m_score_from_divergences(
        kl_divergence(pc, pu), kl_divergence(pc, pr), test=test, tests=tests
    )


def probe_outputs(
    model: torch.nn.Module,
    probes: object,
    feature: UniqueFeature,
    settings: ProbeSettings | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    clean_probs: np.ndarray | None = None,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The model's outputs on D_c, D_u and D_r (Sec. 2.3): three batched passes.

    Args:
        model: maps ``(B, C, H, W)`` to ``(B, K)`` logits (or probabilities).
        probes: the out-of-distribution probe set D_c (``LabelledImages``, array or
            tensor ``(N, C, H, W)``); it is not modified.
        feature: the unique feature z_u.
        settings: the random controls (one fresh z_r per probe) and how the model runs
            (default :class:`ProbeSettings`'s).
        cache_dir: passed to :func:`monai_forget.inference.predict`.
        clean_probs: outputs on D_c computed beforehand (a leak scan reuses them).
        progress: show progress bars.

    Returns:
        ``(p_clean, p_unique, p_random)``, each ``(N, K)`` float64.
    """
    settings = ProbeSettings() if settings is None else settings
    images = as_probe_images(probes)
    feature.check_fits(images.shape)
    masks = feature.random_masks(len(images), settings.seed, settings.random_feature)
    kwargs = dict(**settings.inference_for(model), cache_dir=cache_dir, progress=progress)
    # Three batched passes over the same probe set: clean, then the model composed with
    # z_u, then with the per-probe z_r (each batch is stamped on the fly).
    probe_data = probe_set(images)
    if clean_probs is None:
        clean_probs = predict_probs(model, probe_data, "clean", **kwargs)
    elif len(clean_probs) != len(images):
        raise ValueError(f"clean_probs has {len(clean_probs)} rows for {len(images)} probes")
    carrying = FeatureCarrying(model, feature)
    pu = predict_probs(carrying, probe_data, "unique-feature", **kwargs)
    carrying = FeatureCarrying(model, feature, masks, settings.random_feature)
    pr = predict_probs(carrying, probe_data, "random-feature", **kwargs)
    return np.asarray(clean_probs, dtype=np.float64), pu, pr


def memorisation_score(
    model: torch.nn.Module,
    probes: object,
    feature: UniqueFeature,
    settings: ProbeSettings | None = None,
    *,
    tests: Sequence[str] | None = None,
    decoys: int | Sequence[str] = 0,
    decoy_seed: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    training_data: object | None = None,
    references: Sequence[torch.nn.Module] = (),
    progress: bool = False,
) -> MemorisationScore:
    """Black-box M (Eq. 1 of Hartley & Tsaftaris 2022) of ``model`` for ``feature``.

    Args:
        model: the audited classifier (only its outputs are used).
        probes: out-of-distribution probe set D_c, ``(N, C, H, W)``, N >= 2.
        feature: the known unique feature z_u (e.g. ``UniqueFeature.from_text("ANNA")``).
        settings: the primary test (default Student's t, the paper's), the random
            controls and their seed, how the model runs (:class:`ProbeSettings`; default
            its defaults).
        tests: tests to run (default all: student, welch, paired, wilcoxon).
        decoys: the calibrated test (:mod:`~monai_forget.memorisation.decoys`): a number
            of random texts of z_u's kind to rank M among (0: none, three passes only),
            or the decoy texts themselves. Each decoy costs one more pass.
        decoy_seed: seed of the drawn decoys; default a fresh one, recorded in the result.
        cache_dir: see :func:`monai_forget.inference.predict`.
        training_data: samples known to be in-distribution (e.g. training images); a
            warning is issued for probes identical to any of them.
        references: models trained by the audited model's recipe without the feature
            (at least 2; the benchmark used 8): M of each, with the same probes and
            random controls, is the null of :mod:`~.reference_test`. Three passes each.
        progress: show progress bars.

    Returns:
        The :class:`MemorisationScore` (with ``calibrated`` when decoys were scored,
        ``reference`` when reference models were given).

    Raises:
        ValueError: probes not ``(N, C, H, W)``, fewer than 2, a feature that does not
            fit, probes the model cannot process, outputs that are not probabilities,
            decoys for a feature that is not text, or fewer than 2 references.
    """
    settings = ProbeSettings() if settings is None else settings
    if training_data is not None:
        warn_if_in_distribution(probes, training_data)
    if references and len(references) < MIN_REFERENCES:
        raise ValueError(
            f"{len(references)} reference model(s): the reference test needs at least "
            f"{MIN_REFERENCES} references"
        )
    texts: list[str] = []
    if decoys:
        decoy_seed = fresh_seed() if decoy_seed is None else int(decoy_seed)
        texts = feature_decoys(feature.text, decoys, decoy_seed)
    pc, pu, pr = probe_outputs(
        model, probes, feature, settings, cache_dir=cache_dir, progress=progress
    )
    test = settings.test
    score = compute_m_score(pc, pu, pr, test=test, tests=tests)
    if references:
        outs = (probe_outputs(r, probes, feature, settings) for r in references)
        reference_m = [compute_m_score(*o, tests=(test,), test=test).m for o in outs]
        score = replace(score, reference=reference_test(score.m, reference_m))
    if not texts:
        return score
    d = text_divergences(
        model, as_probe_images(probes), pc, texts, position=feature.position,
        scale=feature.scale, value=feature.value, progress=progress,
        **settings.inference_for(model),
    )  # fmt: skip
    calibrated = decoy_test(score.m, d.mean(axis=1) - score.mean_d_random, texts)
    return replace(score, calibrated=calibrated, decoy_seed=decoy_seed)

"""The membership oracle behind the forgetting rate (Liu et al. 2020, Section IV-A).

Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in Federated
Learning" (arXiv:2003.10933, 2020) measure forgetting with a membership-inference
oracle built by the target-shadow method (Shokri et al., S&P 2017): a shadow model is
trained like the target on data from the same distribution; its confidence vectors on
its own training samples (members) and on held-out samples (non-members) train a
gradient-boosted tree classifier, which then labels the target's confidence vectors.
The paper's classifier is XGBoost (Sec. VI-A, ``classifier="xgboost"``, the ``xgboost``
extra); the default is scikit-learn's ``GradientBoostingClassifier``, the same model
family with no extra dependency.

Features: each confidence vector sorted in decreasing order, the usual input of
shadow-model attacks (Salem et al., NDSS 2019, "ML-Leaks"): sorting makes the attack
class-agnostic, so one classifier serves every class. ``label_confidence=True`` appends
the confidence of the true class, which sorting otherwise hides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from monai_forget.checks import check_choice, check_fraction
from monai_forget.data import LabelledImages
from monai_forget.inference import predict
from monai_forget.scores import check_probabilities
from monai_forget.shadow import Recipe, ShadowTrainer

__all__ = ["MembershipOracle", "oracle_features"]


def oracle_features(probs: object, labels: object | None = None) -> np.ndarray:
    """Confidence vectors sorted in decreasing order (+ the true-class confidence).

    Args:
        probs: ``(N, K)`` confidence vectors.
        labels: When given, the true-class confidence is appended as a last column.

    Returns:
        ``(N, K)`` or ``(N, K + 1)`` float64 features.
    """
    p, y = check_probabilities(probs, labels)
    feats = -np.sort(-p, axis=1)
    if y is not None:
        feats = np.column_stack([feats, p[np.arange(len(y)), y]])
    return feats


@dataclass
class MembershipOracle:
    """Target-shadow membership oracle with a gradient-boosted tree classifier.

    Args:
        recipe: The target's training design; the shadow model is trained with it.
        member_fraction: Share of the shadow data the shadow model trains on (members);
            the rest are its non-members.
        label_confidence: Append the true-class confidence to the sorted vector.
        n_estimators: Boosting stages of the classifier.
        max_depth: Depth of each tree.
        learning_rate: Shrinkage of the boosting.
        classifier: ``"gradient_boosting"`` (scikit-learn) or ``"xgboost"`` (the paper's,
            ``pip install "monai-forget[xgboost]"``).
        seed: Seeds the member/non-member split, the shadow training and the trees.
        device: Where the shadow model trains and models run.
        cache_dir: Shadow-model and prediction cache (``None``: none).

    Attributes (after :meth:`fit`):
        shadow_model_: The shadow model.
        classifier_: The fitted classifier (scikit-learn's or XGBoost's).
        train_accuracy_: The classifier's balanced accuracy on the shadow outputs it
            was fitted on (an upper bound on its accuracy against the target).
    """

    recipe: Recipe | None = None
    member_fraction: float = 0.5
    label_confidence: bool = False
    n_estimators: int = 100
    max_depth: int = 3
    learning_rate: float = 0.1
    classifier: Literal["gradient_boosting", "xgboost"] = "gradient_boosting"
    seed: int = 0
    device: str | torch.device = "cpu"
    cache_dir: str | Path | None = None
    shadow_model_: nn.Module | None = field(default=None, init=False, repr=False)
    classifier_: object | None = field(default=None, init=False, repr=False)
    train_accuracy_: float = field(default=float("nan"), init=False)

    def __post_init__(self) -> None:
        check_fraction("member_fraction", self.member_fraction)
        check_choice("classifier", self.classifier, ("gradient_boosting", "xgboost"))

    def fit(self, shadow_data: LabelledImages) -> MembershipOracle:
        """Train the shadow model on part of ``shadow_data`` and the classifier on its outputs.

        ``shadow_data`` must come from the target's distribution and share no sample
        with the data the oracle will judge.
        """
        if self.recipe is None:
            raise ValueError(
                "the oracle trains a shadow model: pass recipe=... (the target's design)"
            )
        if len(shadow_data) < 4:
            raise ValueError("the shadow data needs at least 4 samples (2 members, 2 non-members)")
        members, nonmembers = shadow_data.split(self.member_fraction, seed=self.seed)
        return self.fit_split(members, nonmembers)

    def fit_split(self, members: LabelledImages, nonmembers: LabelledImages) -> MembershipOracle:
        """Like :meth:`fit`, with the member / non-member split given.

        Use it when samples are correlated within groups (e.g. the slices of one
        patient): a random sample-level split would put slices of a member patient among
        the non-members, and the oracle would learn a blurred boundary. Both sets must
        come from the target's distribution and share no sample (or patient) with the
        data the oracle will judge.
        """
        if self.recipe is None:
            raise ValueError(
                "the oracle trains a shadow model: pass recipe=... (the target's design)"
            )
        if len(members) < 2 or len(nonmembers) < 2:
            raise ValueError(
                f"the oracle needs at least 2 shadow members and 2 non-members, got "
                f"{len(members)} and {len(nonmembers)}"
            )
        trainer = ShadowTrainer(self.recipe, device=self.device, cache_dir=self.cache_dir)
        self.shadow_model_ = trainer.train(members, seed=self.seed)
        member_out = self._predict(self.shadow_model_, members)
        nonmember_out = self._predict(self.shadow_model_, nonmembers)
        return self.fit_predictions(member_out, members.labels, nonmember_out, nonmembers.labels)

    def fit_predictions(
        self,
        member_probs: np.ndarray,
        member_labels: np.ndarray,
        nonmember_probs: np.ndarray,
        nonmember_labels: np.ndarray,
    ) -> MembershipOracle:
        """Fit the classifier on a shadow model's outputs computed beforehand."""
        from sklearn.metrics import balanced_accuracy_score

        x = np.vstack(
            [
                self._features(member_probs, member_labels),
                self._features(nonmember_probs, nonmember_labels),
            ]
        )
        y = np.concatenate([np.ones(len(member_probs), int), np.zeros(len(nonmember_probs), int)])
        if len(np.unique(y)) < 2:
            raise ValueError("the oracle needs both members and non-members to learn from")
        clf = self._classifier()
        clf.fit(x, y)
        self.classifier_ = clf
        self.train_accuracy_ = float(balanced_accuracy_score(y, clf.predict(x)))
        return self

    def _classifier(self) -> object:
        settings = {
            "n_estimators": self.n_estimators,
            "max_depth": self.max_depth,
            "learning_rate": self.learning_rate,
            "random_state": self.seed,
        }
        if self.classifier == "gradient_boosting":
            from sklearn.ensemble import GradientBoostingClassifier

            return GradientBoostingClassifier(**settings)
        try:
            from xgboost import XGBClassifier
        except ImportError as err:
            raise ImportError(
                "classifier='xgboost' needs XGBoost: pip install \"monai-forget[xgboost]\""
            ) from err
        return XGBClassifier(**settings, n_jobs=1)  # one thread: the same trees every run

    def is_member(self, model: nn.Module, data: LabelledImages) -> np.ndarray:
        """The oracle's call on every sample of ``data`` for ``model``: True = member."""
        return self.is_member_probs(self._predict(model, data), data.labels)

    def is_member_probs(self, probs: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
        """The oracle's calls from confidence vectors computed beforehand."""
        if self.classifier_ is None:
            raise ValueError("the oracle is not fitted: call fit(shadow_data) first")
        return self.classifier_.predict(self._features(probs, labels)).astype(bool)

    def _features(self, probs: np.ndarray, labels: np.ndarray | None) -> np.ndarray:
        if self.label_confidence:
            if labels is None:
                raise ValueError("label_confidence=True needs the samples' labels")
            return oracle_features(probs, labels)
        return oracle_features(probs)

    def _predict(self, model: nn.Module, data: LabelledImages) -> np.ndarray:
        return predict(model, data, device=self.device, cache_dir=self.cache_dir).probs

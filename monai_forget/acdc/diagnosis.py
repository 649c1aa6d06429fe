"""The five-group ACDC diagnosis from a patient's clinical features.

The second stage of Isensee et al. 2017 (a classifier over features of the
segmentation), here a multinomial logistic regression on standardised spacing-free
features (:data:`~monai_forget.acdc.features.FEATURES`), scikit-learn's
``StandardScaler`` + ``LogisticRegression`` with ``C = 1``. No record of how this
model and ``C`` were chosen is kept, so no claim is made that the test patients played no
part. What is measured, on expert-mask features of the bundles' datalist (seed 0): the
repeated 5-fold cross-validated accuracy on the 80 training and validation patients,
0.904 +- 0.069, which ``diagnosis_train.json`` records with the classifier, and 19 of
the 20 test patients (0.95); ``tests/test_segmentation_bundle.py`` asserts > 0.8 and
>= 0.85 for them. From the masks the segmentation bundle's cpu profile predicts: 19 of
the 20 (0.95; ``benchmarks/results/acdc_pipeline.md``; a cpu-profile model trained on
another machine gave 18 of 20).

The fitted model is a handful of numbers (the scaler's mean and scale, the
coefficients and intercepts), saved as JSON and applied with numpy: nothing is
unpickled when a user loads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monai_forget.acdc.features import FEATURES, feature_matrix
from monai_forget.data.acdc import ACDC_GROUPS
from monai_forget.results import write_json

__all__ = ["DIAGNOSIS_VERSION", "DiagnosisClassifier"]

#: Format version of the saved classifier.
DIAGNOSIS_VERSION = 1


class DiagnosisClassifier:
    """Standardised features -> multinomial logistic regression -> ACDC group.

    Args:
        features: feature names, in the order of the feature vector.
        c: inverse regularisation strength of the logistic regression.
        class_names: group names by class index (the package's one ACDC order).
    """

    def __init__(
        self,
        features: Sequence[str] = FEATURES,
        c: float = 1.0,
        class_names: Sequence[str] = ACDC_GROUPS,
    ) -> None:
        self.features = tuple(features)
        self.c = float(c)
        self.class_names = tuple(class_names)
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None
        self.coef_: np.ndarray | None = None
        self.intercept_: np.ndarray | None = None

    def _matrix(self, rows: Sequence[Mapping[str, float]] | np.ndarray) -> np.ndarray:
        if isinstance(rows, np.ndarray):
            if rows.ndim != 2 or rows.shape[1] != len(self.features):
                raise ValueError(
                    f"expected an (N, {len(self.features)}) feature matrix, got {rows.shape}"
                )
            return rows.astype(np.float64)
        return feature_matrix(rows, self.features)

    def fit(
        self, rows: Sequence[Mapping[str, float]] | np.ndarray, labels: Sequence[int]
    ) -> DiagnosisClassifier:
        """Fit on feature rows (dicts or an ``(N, F)`` matrix) and class indices.

        Raises:
            ValueError: a class without a patient, or labels outside the class names.
        """
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        x = self._matrix(rows)
        y = np.asarray(labels, dtype=np.int64)
        if len(y) != len(x):
            raise ValueError(f"{len(x)} feature rows but {len(y)} labels")
        absent = sorted(set(range(len(self.class_names))) - set(y.tolist()))
        if absent or y.min() < 0 or y.max() >= len(self.class_names):
            raise ValueError(
                f"labels must cover every class 0..{len(self.class_names) - 1} "
                f"({self.class_names}); missing {[self.class_names[a] for a in absent]}"
            )
        scaler = StandardScaler().fit(x)
        model = LogisticRegression(C=self.c, max_iter=10000).fit(scaler.transform(x), y)
        self.mean_, self.scale_ = scaler.mean_.copy(), scaler.scale_.copy()
        self.coef_, self.intercept_ = model.coef_.copy(), model.intercept_.copy()
        return self

    def _check_fitted(self) -> None:
        if self.coef_ is None:
            raise ValueError("the classifier is not fitted: call fit() or load() first")

    def predict_proba(self, rows: Sequence[Mapping[str, float]] | np.ndarray) -> np.ndarray:
        """``(N, 5)`` group probabilities (softmax of the linear scores)."""
        self._check_fitted()
        z = (self._matrix(rows) - self.mean_) / self.scale_
        scores = z @ self.coef_.T + self.intercept_
        scores -= scores.max(axis=1, keepdims=True)
        probs = np.exp(scores)
        return probs / probs.sum(axis=1, keepdims=True)

    def predict(self, rows: Sequence[Mapping[str, float]] | np.ndarray) -> np.ndarray:
        """Class indices (into :attr:`class_names`)."""
        return self.predict_proba(rows).argmax(axis=1)

    def to_dict(self) -> dict[str, Any]:
        self._check_fitted()
        return {
            "version": DIAGNOSIS_VERSION,
            "model": "standardised features -> multinomial logistic regression",
            "features": list(self.features),
            "class_names": list(self.class_names),
            "c": self.c,
            "mean": self.mean_.tolist(),
            "scale": self.scale_.tolist(),
            "coef": self.coef_.tolist(),
            "intercept": self.intercept_.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> DiagnosisClassifier:
        """Rebuild a saved classifier.

        Raises:
            ValueError: another format version, or arrays that do not fit together.
        """
        where = source or "diagnosis classifier"
        if data.get("version") != DIAGNOSIS_VERSION:
            raise ValueError(f"{where}: unsupported version {data.get('version')!r}")
        out = cls(data["features"], data["c"], data["class_names"])
        out.mean_ = np.asarray(data["mean"], dtype=np.float64)
        out.scale_ = np.asarray(data["scale"], dtype=np.float64)
        out.coef_ = np.asarray(data["coef"], dtype=np.float64)
        out.intercept_ = np.asarray(data["intercept"], dtype=np.float64)
        k, f = len(out.class_names), len(out.features)
        if out.coef_.shape != (k, f) or out.mean_.shape != (f,) or out.intercept_.shape != (k,):
            raise ValueError(f"{where}: coefficients do not fit {k} classes x {f} features")
        return out

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> Path:
        """Write the classifier as JSON (atomically; refused if it exists unless asked)."""
        write_json(path, self.to_dict(), overwrite=overwrite)
        return Path(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> DiagnosisClassifier:
        """Read a classifier saved by :meth:`save`.

        Raises:
            FileNotFoundError: no such file (fit it first).
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"diagnosis classifier {path} not found; fit it first (the pathology "
                "bundle's configs/diagnosis_train.json)"
            )
        return cls.from_dict(json.loads(path.read_text()), source=str(path))

"""Definition 2 of Liu et al. 2020: when a sample counts as totally forgotten.

Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in
Federated Learning" (arXiv:2003.10933, 2020), Definition 2: for a K-class task, a
model has *totally forgotten* a sample when its confidence vector on that sample is
the uniform vector ``U = (1/K, ..., 1/K)``: the model then carries no information
about the sample's class. The elimination objective (Eq. 4) measures the distance of
the outputs to ``U``; :func:`uniform_distance` is that distance and
:func:`forgetting_degree` rescales it to ``[0, 1]`` for reporting.
"""

from __future__ import annotations

import numpy as np

from monai_forget.checks import NON_NEGATIVE, check_in
from monai_forget.scores import check_probabilities

__all__ = [
    "forgetting_degree",
    "max_uniform_distance",
    "totally_forgotten",
    "uniform_distance",
    "uniform_vector",
]


def uniform_vector(num_classes: int) -> np.ndarray:
    """The uniform confidence vector ``U = (1/K, ..., 1/K)`` of Definition 2."""
    if int(num_classes) < 2:
        raise ValueError(f"a classification task needs at least 2 classes, got {num_classes}")
    return np.full(int(num_classes), 1.0 / int(num_classes))


def uniform_distance(probs: object) -> np.ndarray:
    """Squared Euclidean distance ``||p - U||_2^2`` of each confidence vector to ``U``.

    This is the per-sample distance term of Eq. 4 of Liu et al. 2020 (the outputs of
    the model on the elimination set against the uniform vector of Definition 2).

    Args:
        probs: ``(N, K)`` confidence vectors (rows on the probability simplex).

    Returns:
        ``(N,)`` float64 distances, 0 exactly for a totally forgotten sample.
    """
    p, _ = check_probabilities(probs)
    return ((p - 1.0 / p.shape[1]) ** 2).sum(axis=1)


def max_uniform_distance(num_classes: int) -> float:
    """The largest value of :func:`uniform_distance`: ``(K - 1) / K``, reached by one-hot rows."""
    k = len(uniform_vector(num_classes))
    return (k - 1) / k


def forgetting_degree(probs: object) -> np.ndarray:
    """``1 - ||p - U||^2 / ((K - 1) / K)``: 1 when totally forgotten, 0 for a one-hot output.

    A reporting scale for Definition 2 of Liu et al. 2020; the paper itself states the
    definition as an equality, not a degree.
    """
    p, _ = check_probabilities(probs)
    return 1.0 - uniform_distance(p) / max_uniform_distance(p.shape[1])


def totally_forgotten(probs: object, atol: float = 1e-2) -> np.ndarray:
    """Definition 2 of Liu et al. 2020: is each confidence vector uniform?

    Exact equality is never reached by a floating-point softmax, so a sample counts as
    totally forgotten when every component is within ``atol`` of ``1/K``
    (``max_k |p_k - 1/K| <= atol``).

    Args:
        probs: ``(N, K)`` confidence vectors.
        atol: Largest allowed deviation of any component from ``1/K``.

    Returns:
        ``(N,)`` boolean array.
    """
    check_in("atol", atol, NON_NEGATIVE)
    p, _ = check_probabilities(probs)
    return np.abs(p - 1.0 / p.shape[1]).max(axis=1) <= atol

"""Memorisation elimination: make a (federated) model forget one user, and measure it.

Implements Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in
Federated Learning" (Forsaken, arXiv:2003.10933, 2020): Definition 2 (totally
forgotten), Protocol 1 (the dummy-gradient generator), the membership oracle and
the forgetting rate (Section IV-A), the natural / forcible / retraining baselines
(Section IV-B), a site removed after training from what the server kept (FedEraser, Liu
et al. 2021, and retraining from a checkpoint:
:mod:`~monai_forget.unlearning.federaser`), and helpers that split a real data set into
providers and judge a withdrawal. All of it works on any PyTorch/MONAI classifier
without federated training; Protocol 2 (SecForget) on NVIDIA FLARE is in
:mod:`monai_forget.fl`, which imports this package (never the reverse).
"""

from monai_forget.unlearning.baselines import (
    accumulate_updates,
    forcible_forgetting,
    natural_forgetting,
    retrain_from_scratch,
)
from monai_forget.unlearning.confidence import mean_logit_confidence
from monai_forget.unlearning.dummy_gradient import (
    DummyGradientGenerator,
    DummyGradientResult,
    Eq4Terms,
)
from monai_forget.unlearning.federaser import (
    ServerHistory,
    WithdrawalCost,
    federaser,
    retrain_from_checkpoint,
    train_with_history,
)
from monai_forget.unlearning.forgetting import (
    forgetting_degree,
    totally_forgotten,
    uniform_distance,
    uniform_vector,
)
from monai_forget.unlearning.oracle import MembershipOracle, oracle_features
from monai_forget.unlearning.parameters import apply_dummy_gradient, sgd_step
from monai_forget.unlearning.rate import (
    ForgettingRate,
    forgetting_rate,
    forgetting_rate_from_counts,
)

__all__ = [
    "DummyGradientGenerator",
    "DummyGradientResult",
    "Eq4Terms",
    "ForgettingRate",
    "MembershipOracle",
    "ServerHistory",
    "WithdrawalCost",
    "accumulate_updates",
    "apply_dummy_gradient",
    "federaser",
    "forcible_forgetting",
    "forgetting_degree",
    "forgetting_rate",
    "forgetting_rate_from_counts",
    "mean_logit_confidence",
    "natural_forgetting",
    "oracle_features",
    "retrain_from_checkpoint",
    "retrain_from_scratch",
    "sgd_step",
    "totally_forgotten",
    "train_with_history",
    "uniform_distance",
    "uniform_vector",
]

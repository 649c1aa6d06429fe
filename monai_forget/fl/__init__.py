"""Federated memorisation elimination on NVIDIA FLARE (SecForget, Liu et al. 2020).

Protocol 2 (SecForget) of Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization
Elimination in Federated Learning" (arXiv:2003.10933, 2020), run by an existing
federated-learning engine, NVIDIA FLARE (``pip install 'monai-forget[fl]'``):

- :mod:`~monai_forget.fl.spec`: the job description every FLARE client reads
  (:class:`FederatedConfig`, :class:`Withdrawal`, :class:`JobSpec`);
- :mod:`~monai_forget.fl.client`: the client script (FLARE Client API) that trains
  normally and, when asked to withdraw, sends Forsaken's dummy-gradient step in place of
  its update (or the forcible / natural baselines);
- :mod:`~monai_forget.fl.job`: :func:`run_federated`, FedAvg with N clients on the FLARE
  simulator (``FedAvgRecipe`` in ``SimEnv``) with one client withdrawing at a chosen
  round.

The method itself (generator, oracle, forgetting rate, baselines) lives in
:mod:`monai_forget.unlearning` and works without FLARE; this package imports it, never
the reverse. ``nvflare`` is imported only when a federation runs.
"""

from monai_forget.fl.client import FederatedClient, Reply
from monai_forget.fl.job import FederatedRun, WithdrawalError, network_class_path, run_federated
from monai_forget.fl.spec import (
    WITHDRAWAL_METHODS,
    FederatedConfig,
    JobSpec,
    Withdrawal,
    load_tensors,
    save_tensors,
)

__all__ = [
    "WITHDRAWAL_METHODS",
    "FederatedClient",
    "FederatedConfig",
    "FederatedRun",
    "JobSpec",
    "Reply",
    "Withdrawal",
    "WithdrawalError",
    "load_tensors",
    "network_class_path",
    "run_federated",
    "save_tensors",
]

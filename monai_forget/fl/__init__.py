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
  round;
- :mod:`~monai_forget.fl.export`: :func:`export_federated_job`, the same job as a folder
  for a production FLARE deployment, each site reading its own data;
- :mod:`~monai_forget.fl.shadow`: shadow models trained like the federated target
  (FedAvg in one process), for the forgetting rate's oracle;
- :mod:`~monai_forget.fl.run`: the real-data federations (ACDC patient providers,
  PneumoniaMNIST partitions) and :func:`simulate_withdrawal`, a FLARE run plus its
  forgetting rate, audits and accuracies (``monai-forget fl simulate``);
- :mod:`~monai_forget.fl.withdrawal_setup`: :class:`FederatedWithdrawal`, the whole
  withdrawal (federation, training, departure, audits) set up once and checked when
  built, which ``fl simulate`` builds from its options and a Python user builds alike;
- :mod:`~monai_forget.fl.erase`: a site removed after training, from what the server
  kept: FedEraser as a second FLARE job (:func:`run_federaser`), retraining from the
  checkpoint of the round a late site joined in (:func:`run_from_checkpoint`), or
  retraining (:func:`remove_after_training`; ``fl simulate --method
  retrain|federaser|checkpoint``).

The method itself (generator, oracle, forgetting rate, baselines) lives in
:mod:`monai_forget.unlearning` and works without FLARE; this package imports it, never
the reverse. ``nvflare`` is imported only when a federation runs.
"""

from monai_forget.fl.client import FederatedClient, Reply
from monai_forget.fl.erase import remove_after_training, run_federaser, run_from_checkpoint
from monai_forget.fl.export import export_federated_job
from monai_forget.fl.job import FederatedRun, WithdrawalError, network_class_path, run_federated
from monai_forget.fl.outcome import WithdrawalOutcome
from monai_forget.fl.poc import DeploymentError
from monai_forget.fl.run import (
    DEFAULT_GENERATOR,
    acdc_federation,
    audit_recipe,
    federated_oracle,
    mlp_config,
    sample_federation,
    simulate_withdrawal,
)
from monai_forget.fl.shadow import FedAvgShadowRecipe
from monai_forget.fl.spec import (
    REMOVAL_METHODS,
    WITHDRAWAL_METHODS,
    FederatedConfig,
    JobSpec,
    Removal,
    Schedule,
    Withdrawal,
    load_tensors,
    save_tensors,
)
from monai_forget.fl.withdrawal_setup import FederatedWithdrawal
from monai_forget.unlearning.evaluation import AuditPlan

__all__ = [
    "DEFAULT_GENERATOR",
    "REMOVAL_METHODS",
    "WITHDRAWAL_METHODS",
    "AuditPlan",
    "DeploymentError",
    "FedAvgShadowRecipe",
    "FederatedClient",
    "FederatedConfig",
    "FederatedRun",
    "FederatedWithdrawal",
    "JobSpec",
    "Removal",
    "Reply",
    "Schedule",
    "Withdrawal",
    "WithdrawalError",
    "WithdrawalOutcome",
    "acdc_federation",
    "audit_recipe",
    "export_federated_job",
    "federated_oracle",
    "load_tensors",
    "mlp_config",
    "network_class_path",
    "remove_after_training",
    "run_federaser",
    "run_federated",
    "run_from_checkpoint",
    "sample_federation",
    "save_tensors",
    "simulate_withdrawal",
]

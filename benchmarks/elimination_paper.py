"""Benchmark: Forsaken where the paper measured it (Liu et al. 2020, Table III, Fig. 10).

The paper's MNIST setting, as far as the data here allows. Per seed, the 10,000 MNIST
test digits (the 60,000 training digits are not available here) are shuffled and cut
into the two halves of the target-shadow method (Sec. VI-A), each split as ML-Leaks
(Salem et al. 2019) splits its halves:

- target: 30 users x 100 samples (the training set, 3,000), 2,000 never trained on
  (500 of them the withdrawing users' held-out set, 1,500 the test set);
- shadow: 30 users x 100 samples and 2,000 never trained on, for the oracle.

Both federations train the network of Fig. 5 (:class:`monai_forget.networks.
ForsakenMNISTCNN`, 955,646 parameters; Table III: 0.96M) by FedAvg as Protocol 2 runs
it: every round, every user fits a copy on its 100 samples (one local epoch: 5 Adam steps
of 20), the server averages the copies. The elimination set (Sec. VI-A): 10 users chosen
at random, 20 random samples each, 200 samples. Membership oracles are trained on the
shadow model's outputs on its members and non-members: XGBoost (the paper's) and
scikit-learn's gradient boosting (the package default).

Judged, per seed:

- **Table III**: B.R.R, A.R.R and FR = B.R.R x A.R.R (Eq. 2) of Forsaken (the
  generator's class defaults, the paper's fixed number of iterations) **beside
  retraining's** (FedAvg from scratch without the 200 samples, the same oracle; its
  A.R.R averaged over the retrained models), Forsaken's excess over retraining with a
  95 % paired bootstrap interval over the 200 samples, and the oracle's false-positive
  rate on data the target never saw;
- accuracy on the remaining training data and on the test set, before and after;
- **equivalence to retraining** (:func:`monai_forget.unlearning.retrain_reference.
  equivalence_to_retraining`) on each model's advantage on the eliminated samples (mean
  logit confidence there minus on the test set, which cancels the seed-to-seed shift of
  overall confidence): ``--k`` retrained models, margin declared up front as half of
  retraining's membership gap (the same advantage on its members); the never-withdrawn
  model is judged too, as the check that the test has power, and one more retrained
  model as the check that it certifies retraining;
- **Fig. 10**: FR per generator iteration, with accuracy and the equivalence
  difference, to find the paper's "best point";
- Forsaken stopped at non-member confidence (the package's option) beside the paper's.

Models are cached per seed under ``--work``, so an interrupted run resumes. Run::

    python benchmarks/elimination_paper.py --seeds 0 1 2 3 4 --work /tmp/paper \
        --out benchmarks/results/elimination_paper.md
"""

from __future__ import annotations

import argparse
import sys

from _elimination_paper import (
    report,
    run_all,
    run_seed,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--k", type=int, default=6, help="retrained models of the reference")
    parser.add_argument("--rounds", type=int, default=25, help="FedAvg rounds")
    parser.add_argument("--work", required=True, help="model cache (resumable)")
    parser.add_argument("--out", default=None, help="also write the markdown here (atomic)")
    args = parser.parse_args()
    return run_all(args, run_seed, report)


if __name__ == "__main__":
    sys.exit(main())

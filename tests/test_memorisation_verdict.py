"""One verdict for a memorisation score (issue 52, item 2): `MemorisationScore.significant`
decides by the strongest evidence it holds (reference models, else decoys, else the
paper's test), and the command line prints that verdict, not its own."""

import numpy as np

from monai_forget.memorisation.decoys import decoy_test
from monai_forget.memorisation.score import MemorisationScore
from monai_forget.memorisation.significance import OneTailedResult


def _score(paper_p: float, decoy_rank: int | None) -> MemorisationScore:
    calibrated = None
    if decoy_rank is not None:  # M = 1.0 with decoy_rank - 1 of 99 decoys at or above it
        decoys = np.r_[np.full(decoy_rank - 1, 2.0), np.zeros(100 - decoy_rank)]
        calibrated = decoy_test(1.0, decoys)
    return MemorisationScore(1.0, 1.5, 0.5, 30, {"student": OneTailedResult(5.0, paper_p)},
                             calibrated=calibrated)  # fmt: skip


def test_the_decoys_decide_over_the_paper_test():
    """The paper's t-test fires (p = 1e-6) but the decoys do not (p = 30/100): no evidence.
    Before, the API said significant and the command line said no evidence."""
    score = _score(1e-6, decoy_rank=30)
    assert score.deciding_pvalue == score.calibrated.pvalue == 0.3
    assert not score.significant(0.05)
    assert score.evidence() == "calibrated p = 0.3 against decoys"


def test_without_decoys_the_paper_test_decides():
    assert _score(0.01, None).significant(0.05)
    assert not _score(0.06, None).significant(0.05)
    assert _score(0.01, None).evidence() == "student p = 0.01"


def test_a_name_above_every_decoy_is_evidence():
    score = _score(0.5, decoy_rank=1)
    assert score.deciding_pvalue == 0.01 and score.significant(0.05)
    assert not score.significant(0.01)  # p = alpha is not below alpha

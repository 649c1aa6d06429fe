"""The forgetting rate of Liu et al. 2020 (Section IV-A, Table I, Eq. 2).

Liu, Ma, Liu & Ma, "Learn to Forget: User-Level Memorization Elimination in Federated
Learning" (arXiv:2003.10933, 2020). A membership oracle
(:class:`~monai_forget.unlearning.oracle.MembershipOracle`) labels every eliminated
sample as member or non-member of the model's training data, once before and once after
elimination (Table I):

- before: ``T_b`` samples called members, ``F_b`` called non-members;
- after: ``T_a`` called members, ``F_a`` called non-members.

Then (Eq. 2, with the product that Table III's arithmetic implies, e.g.
85.54% x 99% = 84.68%)::

    B.R.R = T_b / (T_b + F_b)      recall of membership before elimination
    A.R.R = F_a / (T_a + F_a)      share called non-member after elimination
    FR    = B.R.R x A.R.R

The **direct rate** reported next to it is the share of samples called members before
that are called non-members after: it follows each sample instead of multiplying two
marginal rates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from monai_forget.results import Result

__all__ = ["ForgettingRate", "forgetting_rate", "forgetting_rate_from_counts"]


@dataclass(frozen=True)
class ForgettingRate(Result):
    """Table I counts of Liu et al. 2020 and the rates computed from them.

    Attributes:
        true_before: ``T_b``, samples the oracle calls members before elimination.
        false_before: ``F_b``, called non-members before.
        true_after: ``T_a``, called members after.
        false_after: ``F_a``, called non-members after.
        member_then_nonmember: samples called members before and non-members after
            (``None`` when built from counts only).
    """

    true_before: int
    false_before: int
    true_after: int
    false_after: int
    member_then_nonmember: int | None = None

    def __post_init__(self) -> None:
        counts = (self.true_before, self.false_before, self.true_after, self.false_after)
        if any(int(c) != c or c < 0 for c in counts):
            raise ValueError(f"counts must be non-negative integers, got {counts}")
        if self.true_before + self.false_before == 0 or self.true_after + self.false_after == 0:
            raise ValueError("the forgetting rate needs at least one eliminated sample")
        if self.member_then_nonmember is not None and not (
            0 <= self.member_then_nonmember <= min(self.true_before, self.false_after)
        ):
            raise ValueError("member_then_nonmember must lie in [0, min(T_b, F_a)]")

    @property
    def brr(self) -> float:
        """B.R.R = T_b / (T_b + F_b) (Liu et al. 2020, Eq. 2)."""
        return self.true_before / (self.true_before + self.false_before)

    @property
    def arr(self) -> float:
        """A.R.R = F_a / (T_a + F_a) (Liu et al. 2020, Eq. 2)."""
        return self.false_after / (self.true_after + self.false_after)

    @property
    def fr(self) -> float:
        """FR = B.R.R x A.R.R (Liu et al. 2020, Eq. 2 / Table III)."""
        return self.brr * self.arr

    @property
    def direct(self) -> float:
        """Share of samples called members before that are called non-members after.

        ``nan`` when no sample was called a member before (nothing to forget) or when
        the rate was built from counts alone.
        """
        if self.member_then_nonmember is None or self.true_before == 0:
            return float("nan")
        return self.member_then_nonmember / self.true_before

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            **asdict(self),
            "brr": self.brr,
            "arr": self.arr,
            "fr": self.fr,
            "direct": self.direct,
        }

    def summary(self) -> str:
        return (
            f"B.R.R {100 * self.brr:.2f}% x A.R.R {100 * self.arr:.2f}% = FR "
            f"{100 * self.fr:.2f}% (direct {100 * self.direct:.2f}%)"
        )


def forgetting_rate_from_counts(
    true_before: int, false_before: int, true_after: int, false_after: int
) -> ForgettingRate:
    """The forgetting rate from Table I's four counts (no direct rate)."""
    return ForgettingRate(int(true_before), int(false_before), int(true_after), int(false_after))


def forgetting_rate(member_before: object, member_after: object) -> ForgettingRate:
    """The forgetting rate from the oracle's per-sample calls before and after elimination.

    Args:
        member_before: ``(N,)`` booleans, True where the oracle calls the sample a member
            of the model before elimination.
        member_after: ``(N,)`` booleans for the same samples, same order, after.
    """
    before = np.asarray(member_before)
    after = np.asarray(member_after)
    if before.dtype != bool or after.dtype != bool:
        raise TypeError("member_before and member_after must be boolean arrays (oracle calls)")
    if before.ndim != 1 or before.shape != after.shape:
        raise ValueError(
            f"member_before and member_after must be (N,) arrays over the same samples; "
            f"got shapes {before.shape} and {after.shape}"
        )
    return ForgettingRate(
        true_before=int(before.sum()),
        false_before=int((~before).sum()),
        true_after=int(after.sum()),
        false_after=int((~after).sum()),
        member_then_nonmember=int((before & ~after).sum()),
    )

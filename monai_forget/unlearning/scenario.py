"""Withdrawal scenarios on real images: providers, calibration, test and oracle sets.

Two ways to split one real data set into providers ``site-1..site-N``:

- :func:`build_patient_federation` (the default): **providers are disjoint groups of
  patients** (ACDC cine-MRI slices, :func:`monai_forget.data.load_acdc_slices`), so a
  withdrawn provider's slices come from patients nobody else has. Every set the
  auditors and the oracle use (calibration, oracle shadow members and non-members,
  test) is made of other patients, never of other slices of a provider's patients.
  Providers are distinguishable by what they really are: their patients' anatomy.
- :func:`build_federation`: seeded, disjoint random partitions of samples (e.g.
  PneumoniaMNIST or the MNIST test digits): exchangeable, i.i.d. providers. Its
  ``signed=`` option is a **constructed scenario**, not real data: it burns a synthetic
  site signature (a border of ``frame_width`` pixels at full intensity) into one
  provider's images, as a stand-in for a scanner artefact.

Why distinguishability matters: Forsaken's generator (Protocol 1 of Liu et al. 2020,
"Learn to Forget: User-Level Memorization Elimination in Federated Learning") moves the
model's outputs on the elimination set towards uniform with the smallest parameter
change. When a provider's samples are exchangeable with everyone else's, the cheapest
change lowers confidence on every provider alike; when they carry something of their
own, the change can stay on them. ``docs/unlearning.md`` reports what happens.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from monai_forget.checks import COUNT, Interval, check_in
from monai_forget.data import LabelledImages

__all__ = [
    "Federation",
    "add_site_frame",
    "build_federation",
    "build_patient_federation",
    "patient_id",
]

_PATIENT = re.compile(r"^(patient\d+)")


def patient_id(sample_id: str) -> str:
    """The patient of an ACDC sample id (``patient001_frame01_slice_3 -> patient001``).

    Raises:
        ValueError: the id does not start with ``patientNNN``.
    """
    match = _PATIENT.match(str(sample_id))
    if match is None:
        raise ValueError(
            f"sample id {sample_id!r} does not start with 'patientNNN'; pass group_of= "
            "a function that maps your sample ids to patients"
        )
    return match.group(1)


def add_site_frame(data: LabelledImages, width: int = 2, value: float = 1.0) -> LabelledImages:
    """A copy of ``data`` with a synthetic burned-in border of ``width`` pixels.

    A constructed site signature (not a property of any real data set), kept for the
    comparison in ``docs/unlearning.md``.
    """
    h, w = data.image_shape[1:]
    check_in("frame width", width, Interval(1, min(h, w) // 2 - 1, "both", integer=True))
    images = np.array(data.images, copy=True)
    images[..., :width, :] = value
    images[..., -width:, :] = value
    images[..., :, :width] = value
    images[..., :, -width:] = value
    return LabelledImages(images, data.labels, data.ids, data.num_classes)


@dataclass(frozen=True)
class Federation:
    """Providers' data plus what the auditors and the oracle need.

    Attributes:
        clients: Provider name -> training data.
        calibration: Provider name -> an auditor's calibration set for that provider
            (same distribution, disjoint from every provider; with patient providers,
            slices of patients no provider has).
        test: Held-out test data.
        shadow: Data for the membership oracle's shadow model. Without
            ``shadow_nonmembers`` the oracle splits it at random into members and
            non-members; with it, ``shadow`` holds the members.
        shadow_nonmembers: The oracle's non-members, when the split is by patient.
        signed: The provider whose images carry the constructed site signature, or
            ``None`` (always ``None`` for real-data federations).
        groups: Provider / set name -> the patients in it (patient federations only).
        calibration_split: Provider name -> its calibration set split by patient into
            (members, non-members), for auditors that train a reference model on part of
            the calibration set (EMA); empty: they split it at random.
        group_of: Sample id -> patient, for patient federations (so that shadow models
            trained "like the target" can keep patients whole); ``None`` otherwise.
        description: One line saying how the federation was built.
    """

    clients: dict[str, LabelledImages]
    calibration: dict[str, LabelledImages]
    test: LabelledImages
    shadow: LabelledImages
    shadow_nonmembers: LabelledImages | None = None
    signed: str | None = None
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    calibration_split: dict[str, tuple[LabelledImages, LabelledImages]] = field(
        default_factory=dict
    )
    group_of: Callable[[str], str] | None = None
    description: str = ""


def build_patient_federation(
    data: LabelledImages,
    *,
    n_clients: int = 3,
    patients_per_class: int = 2,
    calibration_per_class: int = 2,
    shadow_per_class: int = 4,
    group_of: Callable[[str], str] = patient_id,
    centre: bool = True,
    scale: bool = False,
    seed: int = 0,
) -> Federation:
    """Providers made of disjoint patient groups, stratified by the patients' class.

    Each provider gets ``patients_per_class`` patients of every class; the auditors'
    calibration set (shared by all providers: it is "data from the same distribution
    the model never saw") gets ``calibration_per_class``; the oracle's shadow pool gets
    ``shadow_per_class``, split by patient into members and non-members; every other
    patient goes to the test set. No patient appears in two sets. The calibration set
    is also split by patient (half of each class's patients) for auditors that train a
    reference model on part of it.

    ``centre=True`` subtracts one fixed reference image, the mean slice of the
    calibration patients (held-out data, no provider's), from every image: zero-mean
    inputs. It is a preprocessing constant every provider applies before training, not
    a per-provider statistic. Raw [0, 1] cine-MRI slices share most of their content
    (mean cosine similarity 0.67 between slices of *different* patients at 32x32);
    centred, slices of different patients are nearly orthogonal (about 0.0) while a
    patient's own slices stay similar (about 0.5), which is what lets a weight change
    that targets one provider's patients leave the others' outputs alone
    (``docs/unlearning.md`` reports both).

    Args:
        data: Labelled slices with ids (e.g. :func:`monai_forget.data.load_acdc_slices`).
        n_clients: Number of providers.
        patients_per_class: Patients of each class per provider.
        calibration_per_class: Patients of each class in the calibration set.
        shadow_per_class: Patients of each class in the oracle's shadow pool (even: half
            members, half non-members).
        group_of: Sample id -> patient (default: ACDC's ``patientNNN`` prefix).
        centre: Subtract the calibration patients' mean image from every image.
        scale: Also divide by the calibration patients' standard deviation (per pixel;
            for feature vectors of different units, e.g. the ACDC clinical features).
        seed: Seeds which patients go where.

    Raises:
        ValueError: no ids, a patient with slices of two classes, or too few patients.
    """
    if n_clients < 2:
        raise ValueError(f"a federation needs at least 2 providers, got {n_clients}")
    if shadow_per_class < 2 or shadow_per_class % 2:
        raise ValueError(f"shadow_per_class must be even and >= 2, got {shadow_per_class}")
    check_in("patients_per_class", patients_per_class, COUNT)
    check_in("calibration_per_class", calibration_per_class, Interval(2, math.inf, "left", True),
             "the calibration set is split by patient into members and non-members")  # fmt: skip
    if data.ids is None:
        raise ValueError("patient providers need sample ids that name the patient")
    patients = np.array([group_of(i) for i in data.ids])
    label_of = _patient_labels(patients, data.labels)
    rng = np.random.default_rng(seed)
    names = [f"site-{i + 1}" for i in range(n_clients)]
    half = calibration_per_class // 2
    plan = [(n, patients_per_class) for n in names] + [
        ("calibration_members", half),
        ("calibration_nonmembers", calibration_per_class - half),
        ("shadow_members", shadow_per_class // 2),
        ("shadow_nonmembers", shadow_per_class // 2),
    ]
    need = sum(k for _, k in plan)
    groups: dict[str, list[str]] = {name: [] for name, _ in plan}
    groups["test"] = []
    pools = {c: sorted(p for p, y in label_of.items() if y == c) for c in set(label_of.values())}
    # Classes are dealt in the order of their first patient, not of their label index, so
    # renumbering the classes (another label order) sends the same patients to the same
    # sets.
    for cls, pool in sorted(pools.items(), key=lambda item: item[1][0]):
        if len(pool) < need:
            raise ValueError(
                f"class {cls} has {len(pool)} patients but the split needs {need} per class; "
                "lower n_clients, patients_per_class, calibration_per_class or "
                "shadow_per_class"
            )
        pool = list(rng.permutation(pool))
        start = 0
        for name, k in plan:
            groups[name] += pool[start : start + k]
            start += k
        groups["test"] += pool[start:]
    groups["calibration"] = groups["calibration_members"] + groups["calibration_nonmembers"]
    if not groups["test"]:
        raise ValueError("no patient is left for the test set; lower the per-class counts")
    if centre or scale:
        reference = data.subset(np.isin(patients, groups["calibration"])).images
        offset = reference.mean(axis=0, keepdims=True) if centre else 0.0
        spread = reference.std(axis=0, keepdims=True) if scale else 1.0
        data = _shift(data, offset, np.where(spread > 0, spread, 1.0) if scale else 1.0)
    sets = {name: data.subset(np.isin(patients, ps)) for name, ps in groups.items()}
    clients = {n: sets[n] for n in names}
    split = (sets["calibration_members"], sets["calibration_nonmembers"])
    n_cal = len(groups["calibration"])
    return Federation(
        clients=clients,
        calibration=dict.fromkeys(names, sets["calibration"]),
        test=sets["test"],
        shadow=sets["shadow_members"],
        shadow_nonmembers=sets["shadow_nonmembers"],
        groups={name: tuple(sorted(ps)) for name, ps in groups.items()},
        calibration_split=dict.fromkeys(names, split),
        group_of=group_of,
        description=(
            f"{n_clients} providers x {patients_per_class} patients per class "
            f"({', '.join(f'{n}: {len(clients[n])} slices' for n in names)}); calibration "
            f"{n_cal} patients ({len(sets['calibration'])} slices, split by patient for "
            f"EMA), oracle shadow {len(groups['shadow_members'])} members + "
            f"{len(groups['shadow_nonmembers'])} non-members (patients), test "
            f"{len(groups['test'])} patients ({len(sets['test'])} slices); "
            f"{_preprocessing(centre, scale)}"
            f"; seed {seed}"
        ),
    )


def _preprocessing(centre: bool, scale: bool) -> str:
    if centre and scale:
        return "inputs standardised with the calibration patients' mean and deviation"
    if centre:
        return "inputs centred on the calibration mean image"
    return "inputs divided by the calibration deviation" if scale else "raw inputs"


def _shift(
    data: LabelledImages, offset: np.ndarray | float, spread: np.ndarray | float = 1.0
) -> LabelledImages:
    """``data`` with ``offset`` subtracted from every image, divided by ``spread``."""
    images = ((data.images - offset) / spread).astype(np.float32)
    return LabelledImages(images, data.labels, data.ids, data.num_classes)


def _patient_labels(patients: np.ndarray, labels: np.ndarray) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for p, y in zip(patients, labels, strict=True):
        if out.setdefault(str(p), int(y)) != int(y):
            raise ValueError(
                f"patient {p} has samples of classes {out[str(p)]} and {int(y)}; patient "
                "providers need one class per patient (e.g. its pathology group)"
            )
    return out


def build_federation(
    data: LabelledImages,
    *,
    n_clients: int = 3,
    per_client: int = 200,
    calibration_size: int = 200,
    test_size: int = 500,
    shadow_size: int = 400,
    signed: str | None = None,
    frame_width: int = 2,
    label_skew: Sequence[float] | None = None,
    seed: int = 0,
) -> Federation:
    """Split ``data`` at random into providers, calibration, test and shadow sets.

    Sample-level partitions (e.g. PneumoniaMNIST): the providers are exchangeable, or,
    with ``label_skew``, differ in their share of each class (as hospitals with
    different case mixes do).

    Args:
        data: The real data set to split.
        n_clients: Number of providers.
        per_client: Samples per provider.
        calibration_size: Samples in each provider's calibration set.
        test_size: Samples in the test set.
        shadow_size: Samples for the oracle's shadow model.
        signed: Constructed scenario: the provider whose images (and calibration and
            shadow data) get the synthetic site frame; ``None`` (default): none.
        frame_width: Border width of the synthetic site frame in pixels.
        label_skew: Two-class data only: each provider's share of class 1 (one value per
            provider, in [0, 1]); its calibration set has the same share. The test and
            shadow sets are drawn at random from the rest. ``None``: random providers.
        seed: Seeds the split.
    """
    names = [f"site-{i + 1}" for i in range(n_clients)]
    if n_clients < 2:
        raise ValueError(f"a federation needs at least 2 providers, got {n_clients}")
    if signed is not None and signed not in names:
        raise ValueError(f"signed provider {signed!r} is not one of {names}")
    need = n_clients * (per_client + calibration_size) + test_size + shadow_size
    if need > len(data):
        raise ValueError(
            f"the split needs {need} samples but the data set has {len(data)}; lower "
            "per_client, calibration_size, test_size or shadow_size"
        )
    if label_skew is None:
        order = np.random.default_rng(seed).permutation(len(data))
        parts: list[LabelledImages] = []
        start = 0
        for size in (
            [per_client] * n_clients + [calibration_size] * n_clients + [test_size, shadow_size]
        ):
            parts.append(data.subset(np.sort(order[start : start + size])))
            start += size
    else:
        parts = _skewed_parts(
            data,
            label_skew,
            n_clients,
            per_client,
            calibration_size,
            (test_size, shadow_size),
            seed,
        )
    clients = dict(zip(names, parts[:n_clients], strict=True))
    calibration = dict(zip(names, parts[n_clients : 2 * n_clients], strict=True))
    test, shadow = parts[-2], parts[-1]
    if signed is not None:
        clients[signed] = add_site_frame(clients[signed], frame_width)
        calibration[signed] = add_site_frame(calibration[signed], frame_width)
        shadow = add_site_frame(shadow, frame_width)
    sig = (
        "" if signed is None else f"; constructed signature: {frame_width}-pixel border on {signed}"
    )
    if label_skew is not None:
        shares = ", ".join(f"{n} {100 * v:.0f} %" for n, v in zip(names, label_skew, strict=True))
        sig += f"; label skew (share of class 1): {shares}"
    return Federation(
        clients=clients,
        calibration=calibration,
        test=test,
        shadow=shadow,
        signed=signed,
        description=(
            f"{n_clients} random providers x {per_client} samples, calibration "
            f"{calibration_size} each, test {test_size}, oracle shadow pool {shadow_size}"
            f"{sig}; seed {seed}"
        ),
    )


def _skewed_parts(
    data: LabelledImages,
    shares: Sequence[float],
    n_clients: int,
    per_client: int,
    calibration_size: int,
    rest_sizes: Sequence[int],
    seed: int,
) -> list[LabelledImages]:
    """Providers, then calibration sets, with the given shares of class 1; then the
    ``rest_sizes`` sets at random from what is left."""
    if len(shares) != n_clients or not all(0.0 <= v <= 1.0 for v in shares):
        raise ValueError(f"label_skew needs {n_clients} shares in [0, 1], got {list(shares)}")
    labels = np.asarray(data.labels)
    if set(np.unique(labels)) - {0, 1}:
        raise ValueError("label_skew applies to two-class data (labels 0 and 1)")
    rng = np.random.default_rng(seed)
    pools = {c: list(rng.permutation(np.flatnonzero(labels == c))) for c in (0, 1)}
    parts = []
    for size in (per_client, calibration_size):
        for share in shares:
            ones = round(share * size)
            if ones > len(pools[1]) or size - ones > len(pools[0]):
                raise ValueError(
                    f"not enough samples of each class for {n_clients} providers at shares "
                    f"{list(shares)}; lower per_client or calibration_size"
                )
            taken = [pools[1].pop() for _ in range(ones)] + [
                pools[0].pop() for _ in range(size - ones)
            ]
            parts.append(data.subset(np.sort(taken)))
    rest = rng.permutation(np.asarray(pools[0] + pools[1], dtype=np.int64))
    start = 0
    for size in rest_sizes:
        parts.append(data.subset(np.sort(rest[start : start + size])))
        start += size
    return parts

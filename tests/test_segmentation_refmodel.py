"""The reference-model audit of a segmentation model's patients
(``monai_forget.bundles.segmentation_refmodel``), on synthetic patients and models that
remember exactly the patients they were "trained" on, so the right answer is known."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from monai_forget.audit import RefModelReference, RoleOutputs
from monai_forget.bundles.segmentation import SegmentationAuditSetup
from monai_forget.bundles.segmentation_refmodel import SegmentationReferenceAudit, patient_logits
from monai_forget.segmentation import SCORE_NAMES, SegmentationScores

SIZE = 16


def _offset(patient: str) -> float:
    """Each patient's images carry its own background intensity (its fingerprint)."""
    return 0.01 * (int(patient[1:]) + 1)


class RememberingNet(nn.Module):
    """Segments "bright = LV" and is more confident on the patients it remembers.

    The confidence also varies by patient (some are harder for every model) and by
    model (``noise``), so the calibrated scores overlap as real ones do.
    """

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("remembered", torch.full((128,), -1.0))
        self.register_buffer("noise", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offset = x[:, :, :1, :1]  # background pixel = the patient's offset
        seen = (offset.flatten()[:, None] - self.remembered[None]).abs().min(dim=1).values < 1e-3
        hardness = 0.5 * torch.sin(300 * offset.flatten())
        jitter = 0.4 * torch.sin(self.noise * 977 * offset.flatten() + self.noise)
        scale = (1.5 + hardness + jitter + 1.0 * seen).view(-1, 1, 1, 1)
        foreground = ((x - offset) > 0.5).float()
        logits = torch.zeros(x.shape[0], 4, *x.shape[2:])
        logits[:, :1] = scale * (1 - foreground)
        logits[:, 3:] = scale * foreground
        return logits


def _net(remembered: list[str], noise: float) -> RememberingNet:
    net = RememberingNet()
    offsets = [_offset(p) for p in remembered]
    net.remembered[: len(offsets)] = torch.tensor(offsets)
    net.noise[0] = noise
    return net


class RememberingTrainer:
    """Stands in for the bundle's training: the model remembers its training patients."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.calls = folder, []

    def train(self, entries: list[dict], name: str = "shadow") -> Path:
        patients = sorted({e["patient"] for e in entries})
        self.calls.append(patients)
        path = self.folder / f"reference{len(self.calls)}.pt"
        torch.save(_net(patients, noise=len(self.calls)).state_dict(), path)
        return path


def _entries(first: int, count: int, slices: int = 3) -> list[dict]:
    return [
        {"patient": f"p{i:02d}", "label": i % 5, "slice": s}
        for i in range(first, first + count)
        for s in range(slices)
    ]


def _loading(entry: dict) -> dict:
    offset, half = _offset(entry["patient"]), 2 + entry["slice"]
    label = np.zeros((1, SIZE, SIZE), dtype=np.uint8)
    label[:, SIZE // 2 - half : SIZE // 2 + half, SIZE // 2 - half : SIZE // 2 + half] = 3
    image = (offset + (label > 0)).astype(np.float32)
    return {**entry, "image": image, "label": label}


QUERY, MEMBERS, NONMEMBERS = _entries(0, 16), _entries(16, 24), _entries(40, 24)


def _audit(tmp_path: Path, target: list[str], name: str, **kwargs) -> SegmentationReferenceAudit:
    ckpt = tmp_path / f"{name}.pt"
    torch.save(_net(target, noise=0.0).state_dict(), ckpt)
    setup = SegmentationAuditSetup(
        network=RememberingNet,
        target_ckpt=ckpt,
        loading=_loading,
        trainer=RememberingTrainer(tmp_path),
        output_dir=tmp_path / name,
        provider="random2",
        score=kwargs.pop("score", "foreground_confidence"),
        roi_size=(SIZE, SIZE),
    )
    return SegmentationReferenceAudit(
        setup, QUERY, MEMBERS, NONMEMBERS, **{"n_references": 4, **kwargs}
    )


def _patients(entries: list[dict]) -> list[str]:
    return sorted({e["patient"] for e in entries})


def test_patient_logits_by_hand() -> None:
    """Per-patient mean of log s - log(1 - s) over the defined slices, in first-seen order."""
    scores = SegmentationScores(
        {n: np.array([0.5, 0.8, np.nan, 0.2]) for n in SCORE_NAMES},
        groups=("b", "b", "a", "a"),
    )
    patients, phi = patient_logits(scores, "dice")
    assert patients == ["b", "a"]
    np.testing.assert_allclose(phi, [(0.0 + math.log(4)) / 2, math.log(0.25)])
    empty = SegmentationScores({n: np.array([np.nan, 0.3]) for n in SCORE_NAMES}, groups=("a", "b"))
    with pytest.raises(ValueError, match="a: no slice"):
        patient_logits(empty, "dice")


def test_reference_models_pair_up_on_complementary_halves_of_the_known_patients(
    tmp_path: Path,
) -> None:
    """Every known patient is scored; each pair of reference models splits the known
    patients in two whole-patient halves, stratified by group; D_Q is never trained on."""
    audit = _audit(tmp_path, _patients(QUERY + MEMBERS), "a")
    assert audit.entries["members"] == MEMBERS and audit.entries["nonmembers"] == NONMEMBERS
    known = set(_patients(MEMBERS + NONMEMBERS))
    sets = audit.reference_sets()
    assert len(sets) == 4
    halves = [set(_patients(s)) for s in sets]
    for first, second in (halves[:2], halves[2:]):
        assert first | second == known and not first & second
        assert 0.4 * len(known) <= len(first) <= 0.6 * len(known)
    assert halves[0] != halves[2]
    labels = {e["label"] for e in MEMBERS + NONMEMBERS}
    for entries in sets:
        assert {e["label"] for e in entries} == labels
        whole = {p: 3 for p in _patients(entries)}
        assert {p: sum(e["patient"] == p for e in entries) for p in whole} == whole


def test_each_patient_is_scored_against_the_pair_models_that_never_saw_it(
    tmp_path: Path,
) -> None:
    """The reference logit of a known patient is the mean over pairs of the model that
    did not train on it (checked against each model scored on its own); a D_Q patient
    takes one model of each pair; changing n_references to an odd number is refused."""
    audit = _audit(tmp_path, _patients(MEMBERS), "pairs")
    reference = audit.fit_reference()
    models = [set(_patients(s)) for s in audit.reference_sets()]
    logits = [
        audit._logits(_net(sorted(m), noise=k + 1))  # RememberingTrainer's k-th model
        for k, m in enumerate(models)
    ]
    for role in ("members", "nonmembers"):
        patients = logits[0][role][0]
        for i, patient in enumerate(patients):
            outside = [logits[k][role][1][i] for k in range(4) if patient not in models[k]]
            assert len(outside) == 2
            assert reference.reference_mean[role][i] == pytest.approx(np.mean(outside))
    for i in range(len(reference.reference_mean["query"])):
        choices = [[logits[k]["query"][1][i] for k in pair] for pair in ((0, 1), (2, 3))]
        means = [np.mean([a, b]) for a in choices[0] for b in choices[1]]
        assert min(abs(reference.reference_mean["query"][i] - m) for m in means) < 1e-9
    with pytest.raises(ValueError, match="even number of at least 4"):
        _audit(tmp_path, _patients(MEMBERS), "odd", n_references=5)


def test_remembered_and_forgotten_provider(tmp_path: Path) -> None:
    """A target that remembers D_Q is not called forgotten and D_Q scores like its
    members; the target retrained without D_Q is never called "not forgotten"; the
    written result is reproduced from the written reference and per-patient logits."""
    kept = _audit(tmp_path, _patients(QUERY + MEMBERS), "kept").run()
    gone = _audit(tmp_path, _patients(MEMBERS), "gone").run()
    assert kept.decision == "not forgotten", kept.details
    assert gone.decision == "forgotten", gone.details
    assert kept.statistic < 0.001 < 0.5 < gone.statistic
    assert kept.details["membership_strength"] > 0.5 > gone.details["membership_strength"]
    assert gone.details["membership_strength_upper"] < gone.details["margin"]
    assert kept.details["unit"] == "patient" and kept.sizes["query"] == 16
    saved = json.loads((tmp_path / "kept" / "refmodel.json").read_text())
    reference = RefModelReference.from_dict(
        json.loads((tmp_path / "kept" / "refmodel_reference.json").read_text())
    )
    target = {
        r: np.asarray(saved["arrays"][f"{r}_target_signal"])
        for r in ("query", "members", "nonmembers")
    }
    again = reference.audit(RoleOutputs(target))
    assert saved["statistic"] == pytest.approx(again.statistic)
    assert saved["decision"] == again.decision
    assert (tmp_path / "kept" / "refmodel_report.html").is_file()


def test_refuses_shared_patients_and_existing_outputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="D_Q and the known members share patients"):
        setup = SegmentationAuditSetup(
            RememberingNet, "x.pt", _loading, RememberingTrainer(tmp_path), tmp_path, "random2"
        )
        SegmentationReferenceAudit(setup, QUERY, MEMBERS + QUERY[:1], NONMEMBERS)
    audit = _audit(tmp_path, _patients(MEMBERS), "out")
    audit.run()
    with pytest.raises(FileExistsError):
        _audit(tmp_path, _patients(MEMBERS), "out").run()


def test_the_shared_setup_refuses_an_unknown_score_and_names_the_model(tmp_path: Path) -> None:
    """One setup serves both segmentation audits: it checks the score once, for both."""
    with pytest.raises(ValueError, match="score must be one of"):
        SegmentationAuditSetup(
            RememberingNet, "x.pt", _loading, RememberingTrainer(tmp_path), tmp_path, "p",
            score="foreground",
        )  # fmt: skip
    setup = SegmentationAuditSetup(
        RememberingNet, "x.pt", _loading, RememberingTrainer(tmp_path), tmp_path, "random2",
        scenario="retrained",
    )  # fmt: skip
    assert setup.label == "provider random2, retrained"
    assert setup.target_ckpt == Path("x.pt") and setup.output_dir == tmp_path

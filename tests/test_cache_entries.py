"""Cache entries are checked before they are trusted: a damaged, replaced or unrecorded
entry is refused with the entry's name and the fix, a pickle payload is never run, two
processes filling one cache train an entry once, and an audit's provenance names the
exact files (their SHA-256, computed here with hashlib) that decided it."""

from __future__ import annotations

import hashlib
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from monai_forget.audit import KSAuditor
from monai_forget.cache import CacheEntryError
from monai_forget.data import LabelledImages, load_digits
from monai_forget.inference import predict
from monai_forget.processes import load_per_core
from monai_forget.shadow import ShadowTrainer, SupervisedRecipe

RECIPE = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=5)


@pytest.fixture(scope="module")
def digits() -> LabelledImages:
    return load_digits().subset(np.arange(120))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(trainer: ShadowTrainer, data: LabelledImages, *needles: str) -> str:
    with pytest.raises(CacheEntryError) as caught:
        trainer.train(data, seed=0)
    message = str(caught.value)
    path = trainer.cache_path(data, 0)
    assert str(path) in message and "delete" in message, message
    for needle in needles:
        assert needle in message, message
    return message


def test_a_written_entry_records_its_hash_and_is_read_back(digits, tmp_path):
    trainer = ShadowTrainer(RECIPE, cache_dir=tmp_path)
    trainer.train(digits, seed=0)
    path = trainer.cache_path(digits, 0)
    recorded = path.with_name(path.name + ".sha256").read_text().strip()
    assert recorded == _sha256(path)
    reader = ShadowTrainer(RECIPE, cache_dir=tmp_path)
    reader.train(digits, seed=0)
    assert reader.cache_entries == {str(path): recorded}


def test_a_truncated_entry_is_refused_not_a_traceback(digits, tmp_path):
    trainer = ShadowTrainer(RECIPE, cache_dir=tmp_path)
    trainer.train(digits, seed=0)
    path = trainer.cache_path(digits, 0)
    path.write_bytes(path.read_bytes()[:100])
    _refused(trainer, digits, "truncated, damaged or replaced")


def test_a_valid_but_substituted_model_is_refused(digits, tmp_path):
    """Another model's weights (a valid file of the right network) put in place of the
    entry: only the recorded hash tells, and it does."""
    trainer = ShadowTrainer(RECIPE, cache_dir=tmp_path)
    trainer.train(digits, seed=0)
    other = ShadowTrainer(RECIPE).train(digits, seed=1)
    path = trainer.cache_path(digits, 0)
    torch.save(other.state_dict(), path)
    _refused(trainer, digits, "not the file that was written")


def test_an_entry_without_a_recorded_hash_is_not_trusted(digits, tmp_path):
    trainer = ShadowTrainer(RECIPE, cache_dir=tmp_path)
    path = trainer.cache_path(digits, 0)
    path.parent.mkdir(parents=True)
    torch.save(ShadowTrainer(RECIPE).train(digits, seed=0).state_dict(), path)
    _refused(trainer, digits, "no recorded SHA-256")


class _Payload:
    def __reduce__(self):
        return (print, ("payload ran",))


def test_a_pickle_payload_with_a_forged_hash_is_never_run(digits, tmp_path, capsys):
    """Whoever can write the cache can write the hash too: the payload must still not
    run (weights_only), and the refusal must not advise weights_only=False."""
    trainer = ShadowTrainer(RECIPE, cache_dir=tmp_path)
    path = trainer.cache_path(digits, 0)
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps({"weight": _Payload()}))
    path.with_name(path.name + ".sha256").write_text(_sha256(path) + "\n")
    message = _refused(trainer, digits, "holds no weights of the recipe")
    assert "weights_only=False" not in message
    assert "payload ran" not in capsys.readouterr().out


def test_a_substituted_prediction_file_is_refused(digits, tmp_path):
    model = ShadowTrainer(RECIPE).train(digits, seed=0)
    first = predict(model, digits, cache_dir=tmp_path)
    path = Path(first.cache_entry[0])
    assert first.cache_entry[1] == _sha256(path)
    with path.open("wb") as handle:  # valid predictions, other values
        np.savez(handle, probs=np.full_like(first.probs, 0.1), labels=first.labels)
    with pytest.raises(CacheEntryError, match="not the file that was written"):
        predict(model, digits, cache_dir=tmp_path)


_RACE = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from monai_forget.data import load_digits
    from monai_forget.shadow import CallableRecipe, ShadowTrainer, SupervisedRecipe

    base = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=5)

    def fit(model, data, seed, device):
        with open(sys.argv[2], "a") as log:
            log.write("trained\\n")
        time.sleep(2)
        base.fit(model, data, seed=seed, device=device)

    recipe = CallableRecipe(base.build, fit, name="race")
    ShadowTrainer(recipe, cache_dir=sys.argv[1]).train(load_digits().subset(np.arange(120)), 0)
    """
)


@pytest.mark.slow
def test_two_processes_filling_one_cache_train_an_entry_once(tmp_path):
    log = tmp_path / "trainings.log"
    runs = [subprocess.Popen([sys.executable, "-c", _RACE, str(tmp_path / "cache"), str(log)])
            for _ in range(2)]  # fmt: skip
    assert [run.wait(timeout=300 * load_per_core()) for run in runs] == [0, 0]
    assert log.read_text().splitlines() == ["trained"]
    assert not list((tmp_path / "cache").rglob("*.lock"))  # issue 52: none left behind


def test_a_filled_cache_keeps_no_lock_files(digits, tmp_path):
    """Issue 52: a lock file per entry piled up in the cache; each goes once its entry is
    written (models, grouped models and predictions)."""
    recipe = SupervisedRecipe("mlp", {"in_shape": (1, 8, 8), "num_classes": 10}, steps=5)
    trainer = ShadowTrainer(recipe, cache_dir=tmp_path)
    model = trainer.train(digits, seed=0)
    trainer.train_many([digits.subset(slice(0, 60)), digits.subset(slice(60, 120))], [1, 2])
    predict(model, digits, cache_dir=tmp_path)
    assert len(list(tmp_path.rglob("*.sha256"))) == 4
    assert not list(tmp_path.rglob("*.lock"))


def test_the_provenance_names_every_cache_file_that_decided(digits, tmp_path):
    """K-S audit with a cache: its two shadow models and the three models' predictions on
    D_Q are cache entries, each in the provenance with the file's own SHA-256."""
    query, calibration = digits.subset(np.arange(60)), digits.subset(np.arange(60, 120))
    target = ShadowTrainer(RECIPE).train(query, seed=3)
    result = KSAuditor(recipe=RECIPE, cache_dir=tmp_path).audit(target, query, calibration)
    entries = result.provenance["cache_entries"]
    on_disk = sorted(p for p in tmp_path.rglob("*") if p.suffix in (".pt", ".npz"))
    assert sorted(Path(p) for p in entries) == on_disk
    assert len(on_disk) == 5  # two shadow models; three models' predictions on D_Q
    assert all(entries[str(p)] == _sha256(p) for p in on_disk)


def test_a_bundle_training_that_fails_after_saving_leaves_no_entry(tmp_path, monkeypatch):
    from monai_forget.bundles.segmentation import BundleShadowTrainer

    config = tmp_path / "train.json"
    config.write_text("{}")
    trainer = BundleShadowTrainer([str(config)], cache_dir=tmp_path / "cache")
    entries = [{"patient": "patient001", "image": "a.h5"}]
    calls = []

    def saves_then_fails(plain, key, ckpt, name):
        torch.save({"w": torch.zeros(1)}, ckpt)  # the bundle saved its weights ...
        calls.append(ckpt)
        if len(calls) == 1:
            raise RuntimeError("... then its training summary failed")

    monkeypatch.setattr(BundleShadowTrainer, "_run", lambda self, *a: saves_then_fails(*a))
    with pytest.raises(RuntimeError, match="summary failed"):
        trainer.train(entries)
    assert not calls[0].exists()  # no unrecorded entry left to be refused next time
    path = trainer.train(entries)  # trains again, records the entry
    assert path == calls[0] and len(calls) == 2
    assert trainer.train(entries) == path and len(calls) == 2  # now read from the cache


def test_a_reference_model_swapped_for_the_target_is_refused(tmp_path):
    """Issue 50, item 6: a reference model's cache entry replaced by the target with its
    ``.sha256`` record rewritten passed the cache check and decided the audit; now the
    audit refuses references with the target's own weights."""
    from monai_forget.audit import ReferenceModelAuditor

    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits))
    query, members, nonmembers = (digits.subset(order[a:b]) for a, b in
                                  ((0, 100), (100, 400), (400, 700)))  # fmt: skip
    target = ShadowTrainer(RECIPE).train(query.concat(members), seed=5)
    auditor = ReferenceModelAuditor(recipe=RECIPE, cache_dir=tmp_path, n_references=2, workers=1)
    auditor.audit(target, query, (members, nonmembers))  # fills the cache: decides
    weights = sorted(p for p in tmp_path.rglob("*.pt"))
    assert len(weights) == 2
    torch.save(target.state_dict(), weights[0])
    weights[0].with_name(weights[0].name + ".sha256").write_text(_sha256(weights[0]) + "\n")
    with pytest.raises(ValueError, match=r"reference model\(s\) [01] of 2 hold the target's own"):
        auditor.audit(target, query, (members, nonmembers))

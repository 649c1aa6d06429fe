"""The MONAI bundles in ``bundles/``: network, helpers, compliance gate, metadata and
configs. The bounded end-to-end runs on the real data (train -> audit -> evaluate) are in
tests/bundle_runs.py, one test module per bundle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from bundle_runs import BUNDLES
from commands import SCHEMA
from ignite.engine import Engine, Events

from monai_forget.bundles import (
    MetricsWriter,
    audit_metrics,
    labelled_images,
    load_weights,
    save_weights,
    select,
)
from monai_forget.handlers import ComplianceError, ComplianceGate
from monai_forget.networks import LiuTsaftarisCNN, get_network

CONFIGS = ("train.json", "evaluate.json", "inference.json", "audit.json", "multi_gpu_train.json")
#: Configs that overlay train.json, as in the MONAI model zoo (run together with it).
OVERLAYS = ("evaluate.json", "multi_gpu_train.json")


# --------------------------------------------------------------------------------------
# The Liu & Tsaftaris network
# --------------------------------------------------------------------------------------


def test_liu_tsaftaris_cnn_layers_follow_the_paper() -> None:
    net = get_network("liu_tsaftaris_cnn", in_channels=1, num_classes=5)
    assert isinstance(net, LiuTsaftarisCNN)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride, c.padding) for c in convs] == [
        (32, (7, 7), (1, 1), (3, 3)),
        (64, (4, 4), (2, 2), (1, 1)),
        (128, (4, 4), (2, 2), (1, 1)),
        (128, (4, 4), (2, 2), (1, 1)),
    ]
    assert net.head.in_features == 128 * 16 * 16  # 128x128 input, three halvings
    assert net(torch.zeros(3, 1, 128, 128)).shape == (3, 5)


def test_liu_tsaftaris_cnn_refuses_other_sizes() -> None:
    net = LiuTsaftarisCNN(spatial_size=64)
    assert net(torch.zeros(1, 1, 64, 64)).shape == (1, 5)
    with pytest.raises(ValueError, match="built for 64x64 inputs, got \\(128, 128\\)"):
        net(torch.zeros(1, 1, 128, 128))
    with pytest.raises(ValueError, match="divisible by 8"):
        LiuTsaftarisCNN(spatial_size=(100, 128))
    with pytest.raises(ValueError, match="4 blocks"):
        LiuTsaftarisCNN(channels=(8, 16))


# --------------------------------------------------------------------------------------
# Compliance gate
# --------------------------------------------------------------------------------------


#: The papers' auditors only (the gate's default is the reference-model audit).
PAPERS = {"refmodel_metric": None, "ks_metric": "rho_KS", "ema_metric": "rho_EMA"}


def test_compliance_gate_passes_forgotten_and_names_the_failure() -> None:
    gate = ComplianceGate("site-B", alpha=0.1, **PAPERS)
    assert gate.check({"rho_KS": 1.0, "rho_EMA": 0.1}) == {
        "rho_KS": (1.0, True),
        "rho_EMA": (0.1, True),
    }
    with pytest.raises(ComplianceError, match=r"'site-B'.*rho_KS = 0\.5 < 1") as info:
        gate.check({"rho_KS": 0.5, "rho_EMA": 0.01})
    assert "rho_EMA" not in str(info.value)
    with pytest.raises(ComplianceError, match=r"rho_EMA = 0\.3 > alpha = 0\.1"):
        gate.check({"rho_KS": 1.5, "rho_EMA": 0.3})
    with pytest.raises(ComplianceError, match=r"rho_KS = 0\.9 < 1.*rho_EMA = 0\.8 > alpha"):
        gate.check({"rho_KS": 0.9, "rho_EMA": 0.8})
    # Only the metrics asked for are checked; a missing one is a clear error.
    ks_only = ComplianceGate("x", **{**PAPERS, "ema_metric": None})
    assert ks_only.check({"rho_KS": 2.0}) == {"rho_KS": (2.0, True)}
    with pytest.raises(KeyError, match="needs metric 'rho_EMA'"):
        ComplianceGate("x", **PAPERS).check({"rho_KS": 2.0})
    with pytest.raises(ValueError, match="refmodel_metric, ks_metric or ema_metric"):
        ComplianceGate("x", refmodel_metric=None)
    with pytest.raises(ValueError, match="alpha"):
        ComplianceGate("x", alpha=1.5)


def test_compliance_gate_on_the_reference_model_audit_by_default() -> None:
    """Only "forgotten" passes: the audit's own decision, and the gate's levels on top.
    Evidence of remembering (p <= alpha, the boundary included), a bound at or above the
    margin, or an audit whose data checks withheld the decision all stop the run."""
    gate = ComplianceGate("site-B")
    decided = {"p_member": 0.4, "p_member_upper": 0.2, "p_member_forgotten": 1.0}
    assert gate.check(decided) == {"p_member": (0.4, True)}
    with pytest.raises(ComplianceError, match=r"p_member = 0\.05 <= 0\.05.*not forgotten"):
        gate.check({**decided, "p_member": 0.05})
    with pytest.raises(ComplianceError, match=r"up to 50% .*margin 0\.5.*inconclusive"):
        gate.check({**decided, "p_member_upper": 0.5})
    with pytest.raises(ComplianceError, match=r"p_member = 0\.4 > 0\.05.*made no decision"):
        gate.check({**decided, "p_member_forgotten": 0.0})
    # a stricter gate than the audit: its own margin
    with pytest.raises(ComplianceError, match=r"up to 20% .*margin 0\.1"):
        ComplianceGate("site-B", margin=0.1).check(decided)
    # without the handler's bound or decision nothing passes
    with pytest.raises(ComplianceError):
        gate.check({"p_member": 0.4})
    with pytest.raises(ValueError, match="margin must be in"):
        ComplianceGate("site-B", margin=0.0)


def _engine_with_metrics(metrics: dict[str, float]) -> Engine:
    engine = Engine(lambda e, b: None)

    @engine.on(Events.EPOCH_COMPLETED)
    def _metrics(e: Engine) -> None:  # registered first, like an evaluator's metrics
        e.state.metrics.update(metrics)

    return engine


def test_compliance_gate_fails_an_engine_run_at_epoch_end() -> None:
    engine = _engine_with_metrics({"rho_KS": 0.2, "rho_EMA": 0.9})
    ComplianceGate("withdrawn", **PAPERS).attach(engine)
    with pytest.raises(ComplianceError, match="must be forgotten"):
        engine.run([0, 1], max_epochs=1)
    engine = _engine_with_metrics({"rho_KS": 1.3, "rho_EMA": 1e-6})
    gate = ComplianceGate("withdrawn", **PAPERS)
    gate.attach(engine)
    engine.run([0, 1], max_epochs=1)
    assert gate.last_check == {"rho_KS": (1.3, True), "rho_EMA": (1e-6, True)}


# --------------------------------------------------------------------------------------
# Helpers the configs call
# --------------------------------------------------------------------------------------


def _entries() -> list[dict]:
    out = []
    for p in range(8):
        for s in range(3):
            out.append(
                {"image": f"p{p}.h5", "slice": s, "patient": f"p{p}", "label": p % 2,
                 "site": "A" if p < 4 else "B"}
            )  # fmt: skip
    return out


def test_select_filters_providers_and_keeps_patients_together() -> None:
    entries = _entries()
    before = json.dumps(entries)
    only_b = select(entries, check_files=False, sites="B")
    assert {e["site"] for e in only_b} == {"B"} and len(only_b) == 12
    assert select(entries, check_files=False, exclude_sites=["B"]) == select(
        entries, check_files=False, sites=["A"]
    )
    small = select(entries, check_files=False, max_per_class=1, seed=3)
    patients = {e["patient"] for e in small}
    assert len(patients) == 2 and len(small) == 6  # one patient per class, all 3 slices
    assert {e["label"] for e in small} == {0, 1}
    assert small == select(entries, max_per_class=1, seed=3, check_files=False)  # seeded
    assert json.dumps(entries) == before  # inputs untouched
    with pytest.raises(
        ValueError, match=r"provider\(s\) \['C'\] not found; providers: \['A', 'B'\]"
    ):
        select(entries, check_files=False, sites="C")
    with pytest.raises(ValueError, match="no entries left"):
        select(entries, check_files=False, sites="A", exclude_sites="A")
    with pytest.raises(ValueError, match="no 'site' field"):
        select([{"image": "x", "label": 0}], sites="A", check_files=False)


def test_a_max_per_class_cut_is_logged(caplog) -> None:
    """Issue 34, item 12: --max_per_class cut the evaluated test split without a word."""
    entries = _entries()
    with caplog.at_level("INFO", logger="monai_forget.bundles.datalist"):
        select(entries, check_files=False, max_per_class=1, seed=3, name="test")
        select(entries, check_files=False, max_per_class=8, name="whole")  # cuts nothing
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"test: max_per_class=1 keeps 6 of {len(entries)} entries (seed 3)"]


def test_select_names_a_missing_image_file(tmp_path: Path) -> None:
    present = tmp_path / "p0.png"
    present.write_bytes(b"x")
    entries = [
        {"image": str(present), "label": 0, "site": "A"},
        {"image": str(tmp_path / "gone.png"), "label": 1, "site": "B"},
    ]
    assert select(entries, sites="A") == entries[:1]  # only the selected entries count
    with pytest.raises(FileNotFoundError, match=r"training: 1 image file.*gone\.png.*prepare"):
        select(entries, name="training")


def test_labelled_images_stacks_and_refuses_mixed_shapes() -> None:
    entries = [{"image": i, "label": i % 2} for i in range(4)]

    def transform(d: dict) -> dict:
        return {"image": torch.full((1, 4, 4), float(d["image"])), "label": d["label"]}

    data = labelled_images(entries, transform, num_classes=2)
    assert data.images.shape == (4, 1, 4, 4) and data.labels.tolist() == [0, 1, 0, 1]
    assert data.num_classes == 2

    def ragged(d: dict) -> dict:
        return {"image": torch.zeros(1, 4, 4 + d["image"])}

    with pytest.raises(ValueError, match="must crop or resize to one size"):
        labelled_images(entries, ragged, num_classes=2)


def test_weights_round_trip_atomic_and_not_clobbered(tmp_path: Path) -> None:
    net = LiuTsaftarisCNN(spatial_size=16)
    path = save_weights(net, tmp_path / "m.pt")
    with pytest.raises(FileExistsError, match="overwrite"):
        save_weights(net, path)
    other = load_weights(LiuTsaftarisCNN(spatial_size=16), path)
    assert not other.training
    for a, b in zip(net.state_dict().values(), other.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="does not fit"):
        load_weights(LiuTsaftarisCNN(spatial_size=32), path)
    with pytest.raises(FileNotFoundError, match="train it first"):
        load_weights(net, tmp_path / "missing.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]  # no temporary left


def test_audit_metrics_refuse_another_provider_or_size(tmp_path: Path) -> None:
    ref = {
        "version": 1,
        "provider": "B",
        "query_size": 3,
        "ks": {"query_confidence": [0.9, 0.99, 1.0], "calibration_confidence": [0.2, 0.5, 0.6]},
    }
    path = tmp_path / "reference.json"
    path.write_text(json.dumps(ref))
    metrics = audit_metrics(path, provider="B", query_size=3)
    assert list(metrics) == ["rho_KS"]
    with pytest.raises(ValueError, match=r"computed for provider 'B'.*'A'"):
        audit_metrics(path, provider="A")
    with pytest.raises(ValueError, match=r"computed on 3 query samples.*covers 5"):
        audit_metrics(path, provider="B", query_size=5)
    with pytest.raises(FileNotFoundError, match=r"run the bundle's audit\.json"):
        audit_metrics(tmp_path / "none.json")


def test_metrics_writer_refuses_existing_file(tmp_path: Path) -> None:
    out = tmp_path / "metrics.json"
    out.write_text("{}")
    with pytest.raises(FileExistsError):
        MetricsWriter(out)
    writer = MetricsWriter(out, class_names=["a", "b"], extra={"n": 2}, overwrite=True)
    engine = _engine_with_metrics({"acc": 0.5})
    engine.add_event_handler(
        Events.EPOCH_COMPLETED, lambda e: e.state.metrics.update(recall=torch.tensor([1.0, 0.0]))
    )
    writer.attach(engine)
    engine.run([0], max_epochs=1)
    record = json.loads(out.read_text())
    assert record == {
        "metrics": {"acc": 0.5, "recall": [1.0, 0.0], "recall_by_class": {"a": 1.0, "b": 0.0}},
        "n": 2,
    }


# --------------------------------------------------------------------------------------
# Metadata, configs, network in/out (offline, no data needed)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SCHEMA.is_file():
        pytest.skip(f"MONAI metadata schema not found at {SCHEMA}")
    path = tmp_path_factory.mktemp("schema") / "meta_schema.json"
    shutil.copyfile(SCHEMA, path)
    return path


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_metadata_verifies_offline(bundle: str, schema_copy: Path) -> None:
    from monai.bundle import verify_metadata

    meta = BUNDLES[bundle] / "configs" / "metadata.json"
    before = schema_copy.read_bytes()
    verify_metadata(meta_file=str(meta), filepath=str(schema_copy))  # raises when invalid
    assert schema_copy.read_bytes() == before  # nothing was downloaded over it
    content = json.loads(meta.read_text())
    assert content["network_data_format"]["inputs"]["image"]["num_channels"] == 1
    assert "pred" in content["network_data_format"]["outputs"]


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_bundle_files_and_configs_parse(bundle: str) -> None:
    from monai.bundle import ConfigParser

    root = BUNDLES[bundle]
    for name in ("LICENSE", "docs/README.md", "configs/logging.conf"):
        assert (root / name).is_file(), name
    for name in CONFIGS:
        parser = ConfigParser()
        overlay = [root / "configs" / "train.json"] if name in OVERLAYS else []
        parser.read_config([*overlay, root / "configs" / name])
        parser.read_meta(root / "configs" / "metadata.json")
        parser["bundle_root"] = str(root)
        assert "run" in parser.config, name
        net = parser.get_parsed_content("network_def")
        meta = parser.get("_meta_")["network_data_format"]
        shape = meta["inputs"]["image"]["spatial_shape"]
        out = net.eval()(torch.rand(2, 1, *shape))
        assert out.shape == (2, meta["outputs"]["pred"]["num_channels"]), name
    assert not list(root.glob("scripts")), "custom code belongs in the monai_forget package"


@pytest.mark.parametrize("bundle", sorted(BUNDLES))
def test_verify_net_in_out(bundle: str) -> None:
    from monai.bundle import verify_net_in_out

    root = BUNDLES[bundle] / "configs"
    verify_net_in_out(
        net_id="network_def",
        meta_file=str(root / "metadata.json"),
        config_file=str(root / "inference.json"),
        device="cpu",
    )


def test_training_summary_names_the_epoch_the_saved_model_is(tmp_path) -> None:
    """Issue 34, item 9: the segmentation bundle saves the last epoch's weights, but its
    model_train.json gave the best validation epoch as the checkpoint's (1 for a model
    of epoch 2). The summary says which epoch the file is, and keeps the best apart."""
    from types import SimpleNamespace

    from monai_forget.bundles import save_training_summary

    trainer = SimpleNamespace(
        state=SimpleNamespace(epoch=2, iteration=6, epoch_length=3, times={}, metrics={})
    )
    evaluator = SimpleNamespace(
        state=SimpleNamespace(
            metrics={"val_mean_dice": 0.4}, best_metric_epoch=1, key_metric_name="val_mean_dice",
            best_metric=0.5,
        )
    )  # fmt: skip
    last = save_training_summary(tmp_path / "last.json", trainer, evaluator)
    assert last["checkpoint"] == {"file": None, "selection": "last", "epoch": 2}
    assert last["best_validation"]["epoch"] == 1 and last["best_validation"]["value"] == 0.5
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    best = save_training_summary(tmp_path / "best.json", trainer, evaluator, checkpoint=model)
    assert best["checkpoint"]["selection"] == "best" and best["checkpoint"]["epoch"] == 1
    assert json.loads((tmp_path / "last.json").read_text())["checkpoint"]["epoch"] == 2


def test_segmentation_eval_metrics_are_the_measured_figures() -> None:
    """The segmentation bundle's metadata quotes the full profile's test Dice and HD95 as
    the benchmark's results table gives them (the ED+ES row)."""
    root = Path(__file__).resolve().parents[1]
    metadata = json.loads(
        (root / "bundles" / "acdc_segmentation" / "configs" / "metadata.json").read_text()
    )
    table = (root / "benchmarks" / "results" / "acdc_pipeline.md").read_text()
    full = table.split("full profile, seed 0")[1].split("## ")[0]
    row = next(x for x in full.splitlines() if x.startswith("| ED+ES |"))
    cells = [float(c) for c in row.strip(" |").split(" | ")[2:]]
    names = ["dice_rv", "dice_myo", "dice_lv", "mean_dice", "hd95_rv_pixels",
             "hd95_myo_pixels", "hd95_lv_pixels"]  # fmt: skip
    assert metadata["eval_metrics"] == dict(zip(names, cells, strict=True))

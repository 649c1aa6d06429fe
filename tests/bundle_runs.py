"""The bundles' bounded end-to-end runs on the real data, shared by one test module per
bundle (tests/test_bundle_run_cxr.py, tests/test_bundle_run_acdc.py) so that pytest-xdist
runs the two bundles on different workers.

Every command of a bundle's docs/README.md runs in a copy of the bundle, as a user types
it, with options appended that bound the run; train (a) with and (b) without the provider,
evaluate, audit both, evaluate D_Q with the audit metrics and the gate (issue 16).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BUNDLES = {
    "cxr": REPO / "bundles" / "cxr_pneumonia_classification",
    "acdc": REPO / "bundles" / "acdc_pathology_classification",
}

#: Bounded settings per bundle: the provider; options appended to the data preparation
#: (two providers); the training subset (per class) every config gets; the design the
#: training commands and, as shadow_settings, the shadow models get; the calibration
#: subset of the audits.
BOUNDED = {
    "cxr": {
        "provider": "random1",
        # --keep-repeats: the datalist as before repeats were left out by default. With
        # them left out the 60-per-class subset changes and K-S calls model (a)
        # "forgotten" (rho_KS 1.0, measured): K-S's decision here depends on the subset
        # (issue 11), so the asserted decisions hold for this subset only.
        "prepare": "--random-sites 2 --keep-repeats",
        "subset": {"max_per_class": 60},
        "design": {"epochs": 16, "steps_per_epoch": 8, "batch_size": 32, "val_max_per_class": 10},
        "shape": {},
        "calibration_max_per_class": 30,
    },
    "acdc": {
        "provider": "random2",
        "prepare": "",
        "subset": {"max_per_class": 4},
        # Validated at the last epoch only: with one validation patient per class the best
        # epoch is an early one, which has not yet memorised its training slices.
        "design": {
            "epochs": 16,
            "steps_per_epoch": 8,
            "batch_size": 16,
            "val_max_per_class": 1,
            "val_interval": 16,
        },
        "shape": {"patch_size": 64, "canvas_size": 72, "resize_longest": 128},
        "calibration_max_per_class": 4,
    },
}

#: Documented commands run elsewhere: a layout this project has no data for, covered
#: by tests/test_documented_commands.py on a synthetic copy of the layout.
ELSEWHERE = {
    "monai-forget prepare kermany /data/chest_xray -o data/kermany.json --random-sites 5 --seed 0"
}


def _options(values: dict) -> str:
    """``--key value`` options for ``python -m monai.bundle run`` (values as Python literals)."""
    return " ".join(
        f"--{k} {v!r}" if isinstance(v, str) else f'--{k} "{v!r}"' for k, v in values.items()
    )


def bundle_commands(bundle: str) -> list[str]:
    """The commands of the bundle's docs/README.md, in their order."""
    from commands import commands_in

    text = (BUNDLES[bundle] / "docs" / "README.md").read_text(encoding="utf-8")
    return [c for c in commands_in(text) if c not in ELSEWHERE]


def _bounding(bundle: str, command: str, settings: dict) -> str:
    """The options appended to one documented command to bound it."""
    subset, shape = _options(settings["subset"]), _options(settings["shape"])
    if command.startswith("monai-forget prepare"):
        return settings["prepare"]
    if "multi_gpu_train.json" in command:  # a second, short training: 2 epochs
        small = {**settings["design"], "epochs": 2, "val_interval": 1}
        return f"--ckpt_file models/model_ddp.pt {subset} {shape} {_options(small)}"
    if "configs/train.json" in command and "evaluate.json" not in command:
        return f"{subset} {shape} {_options(settings['design'])}"
    if "configs/audit.json" in command:
        shadow = {**settings["design"], **settings["shape"], "max_per_class": None}
        calibration = {"calibration_max_per_class": settings["calibration_max_per_class"]}
        bounds = f"{subset} {shape} {_options(calibration)} --n_references 2"
        return f'{bounds} --shadow_settings "{shadow!r}"'
    if "evaluate.json" in command:
        return f"{subset} {shape}"
    if "verify_net_in_out" in command:  # the network at the metadata's input shape
        return ""
    if "inference.json" in command:
        return shape
    return ""


def dicom_radiograph(pixels: np.ndarray, path: Path) -> None:
    """A 12-bit MONOCHROME1 radiograph whose window shows exactly ``pixels`` (uint8)."""
    import pydicom
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = pydicom.Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID = (
        meta.MediaStorageSOPClassUID,
        meta.MediaStorageSOPInstanceUID,
    )
    ds.Modality, ds.PatientName = "DX", "TEST^XRAY"
    ds.Rows, ds.Columns = pixels.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME1"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.RescaleSlope, ds.RescaleIntercept = 1, -1024
    ds.WindowCenter, ds.WindowWidth = 1530, 3060  # window 0..3060: white = 0 when inverted
    stored = 3060 - 12 * pixels.astype(np.uint16) + 1024  # within 12 bits
    ds.PixelData = stored.astype(np.uint16).tobytes()
    ds.save_as(path, enforce_file_format=True)


def run_bounded_scenario(bundle: str, data_root: Path, tmp: Path, settings: dict) -> dict:
    """Run every documented command of the bundle in a copy of it; returns the results."""
    from commands import SCHEMA, check, environment, needs_absent_schema, run_line

    root = tmp / BUNDLES[bundle].name
    shutil.copytree(BUNDLES[bundle], root, ignore=shutil.ignore_patterns(*IGNORED))
    schema = tmp / "meta_schema_20240725.json"
    if SCHEMA.is_file():
        shutil.copyfile(SCHEMA, schema)
    xr = tmp / "xr"  # image files for --image_glob: PNGs and their DICOM radiographs
    env = environment(data_root)
    out: dict = {"root": root, "runs": {}, "bundle": bundle}
    for command in bundle_commands(bundle):
        if needs_absent_schema(command):
            continue
        if "/data/xr" in command and not xr.exists():
            from PIL import Image

            xr.mkdir()
            for png in sorted((root / "data" / "pneumoniamnist").glob("test_0000*.png"))[:4]:
                shutil.copyfile(png, xr / png.name)
                dicom_radiograph(np.asarray(Image.open(png)), xr / f"{png.stem}.dcm")
        result = run_line(
            command,
            root,
            extra=_bounding(bundle, command, settings),
            replace={"/data/xr": str(xr), "/tmp/meta_schema_20240725.json": str(schema)},
            env=env,
        )
        out["runs"][command] = result
        if "--compliance_gate True" not in command:
            check(result)
    provider = settings["provider"]
    read = lambda path: json.loads((root / path).read_text())  # noqa: E731
    out["test"] = read("eval/test/metrics.json")
    for case, audit_dir, eval_dir in (
        ("a", provider, f"training_{provider}"),
        ("b", f"{provider}_retrained", f"training_{provider}_retrained"),
    ):
        out[case] = {
            "refmodel": read(f"audit/{audit_dir}/refmodel.json"),
            "ks": read(f"audit/{audit_dir}/ks.json"),
            "ema": read(f"audit/{audit_dir}/ema.json"),
            "eval": read(f"eval/{eval_dir}/metrics.json"),
            "report": (root / "audit" / audit_dir / "report.html").is_file(),
            "reference": root / "audit" / audit_dir / "reference.json",
        }
    out["ckpt"] = {"a": "models/model.pt", "b": f"models/model_without_{provider}.pt"}
    return out


IGNORED = ("data", "models", "eval", "audit", "cache", "inference", "logs")


def run_evaluation(bounded_run: dict, case: str, *options: str) -> subprocess.CompletedProcess:
    """The documented evaluation over D_Q (with --audit True) for model (a) or (b), with
    more options (the gate variants the docs describe in prose)."""
    from commands import environment

    settings = BOUNDED[bounded_run["bundle"]]
    provider = settings["provider"]
    reference = bounded_run[case]["reference"]
    configs = "\"['configs/train.json','configs/evaluate.json']\""
    bounds = f"{_options(settings['subset'])} {_options(settings['shape'])}"
    line = (
        f"python -m monai.bundle run --config_file {configs} --section training --provider "
        f"{provider} --audit True --ckpt_file {bounded_run['ckpt'][case]} --audit_reference "
        f"{reference} {bounds} " + " ".join(options)
    )
    return subprocess.run(["bash", "-c", line], cwd=bounded_run["root"], env=environment(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def _gate_message(result: subprocess.CompletedProcess) -> str:
    """The gate's message (the line saying what must be forgotten) in a failed run."""
    assert result.returncode != 0 and "ComplianceError" in result.stderr, result.stderr[-3000:]
    return next(line for line in result.stderr.splitlines() if "must be forgotten" in line)


class BoundedRunTests:
    """The checks of one bundle's bounded run; a subclass names the bundle (``BUNDLE``)."""

    BUNDLE: str

    @pytest.fixture(scope="class")
    @classmethod
    def bounded_run(cls, shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
        tmp = tmp_path_factory.mktemp(f"bundle_{cls.BUNDLE}")
        out = run_bounded_scenario(cls.BUNDLE, shared_data, tmp, BOUNDED[cls.BUNDLE])
        out["tmp"] = tmp
        return out

    def test_bounded_run_evaluates_and_writes_every_output(self, bounded_run: dict) -> None:
        from monai_forget.bundles import REFERENCE_VERSION

        names = json.loads((BUNDLES[bounded_run["bundle"]] / "configs" / "train.json").read_text())
        num_classes = names["num_classes"]
        test = bounded_run["test"]["metrics"]
        # the bounded models learn: above chance on the held-out test section
        assert test["accuracy"] > 1.0 / num_classes and test["auc"] > 0.5, test
        assert len(test["recall"]) == num_classes
        assert list(test["recall_by_class"]) == names["class_names"]
        for case in ("a", "b"):
            assert bounded_run[case]["report"]
            reference = json.loads(bounded_run[case]["reference"].read_text())
            assert reference["version"] == REFERENCE_VERSION
            assert reference["provider"] == BOUNDED[bounded_run["bundle"]]["provider"]
            query_size = bounded_run[case]["ks"]["sizes"]["query"]
            evaluated = bounded_run[case]["eval"]
            assert reference["query_size"] == query_size == evaluated["query_samples"]
            # The evaluation covers the reference-model audit's whole set (D_Q and the scored
            # known members and non-members) and reproduces every audit on it.
            refmodel = bounded_run[case]["refmodel"]
            roles = ("query", "members", "nonmembers")
            assert evaluated["samples"] == sum(refmodel["sizes"][r] for r in roles)
            metrics = evaluated["metrics"]
            assert metrics["p_member"] == pytest.approx(refmodel["statistic"], rel=1e-6, abs=1e-12)
            assert metrics["rho_KS"] == pytest.approx(
                bounded_run[case]["ks"]["statistic"], rel=1e-9
            )
            assert metrics["rho_EMA"] == pytest.approx(
                bounded_run[case]["ema"]["statistic"], rel=1e-6, abs=1e-12
            )
            calibration = bounded_run[case]["ks"]["sizes"]["calibration"]
            assert calibration > query_size // 2  # retained + held-out data of other providers
        # An existing model is never replaced silently; the hint is the bundle's own flag.
        from commands import environment

        train = "python -m monai.bundle run --config_file configs/train.json"
        again = subprocess.run(["bash", "-c", train], cwd=bounded_run["root"], env=environment(),
                               capture_output=True, text=True, timeout=600)  # fmt: skip
        assert again.returncode != 0 and "FileExistsError" in again.stderr
        assert "MONAI bundle: --overwrite True" in again.stderr

    def test_bounded_run_audit_decisions(self, bounded_run: dict) -> None:
        """(a) the model trained with the provider remembers it, for both auditors; (b) the
        one retrained without it has forgotten it, for EMA.

        K-S's decision on (b) is not asserted: a retrained model is about as far from the
        query shadow as the calibration shadow is, so rho_KS lands at the threshold of 1.
        Measured: at or above 1 on one torch thread, 0.995 (ACDC) and 0.58 (PneumoniaMNIST)
        on two (see the bundles' docs). What holds is the ordering: (b) is further from the
        query shadow than (a).
        """
        decisions = {
            case: {m: bounded_run[case][m]["decision"] for m in ("ks", "ema")} for case in "ab"
        }
        stats = {
            case: {m: bounded_run[case][m]["statistic"] for m in ("ks", "ema")} for case in "ab"
        }
        assert decisions["a"] == {"ks": "not forgotten", "ema": "not forgotten"}, stats
        assert decisions["b"]["ema"] == "forgotten", stats
        assert stats["b"]["ema"] <= 0.1 < stats["a"]["ema"]
        assert stats["a"]["ks"] < 1.0 and stats["b"]["ks"] > stats["a"]["ks"] + 0.1, stats

    def test_bounded_run_reference_model_audit_is_never_wrong(self, bounded_run: dict) -> None:
        """The reference-model auditor may be inconclusive at this size, never wrong: (a)
        trained with the provider is not called forgotten, (b) retrained without it is not
        called "not forgotten"."""
        found = {case: bounded_run[case]["refmodel"] for case in "ab"}
        summary = {
            c: (r["decision"], r["statistic"], r["details"]["membership_strength_upper"])
            for c, r in found.items()
        }
        print(f"{bounded_run['bundle']}: reference-model audit (decision, p, bound) {summary}")
        assert found["a"]["decision"] != "forgotten", summary
        assert found["b"]["decision"] != "not forgotten", summary

    def test_bounded_run_compliance_gate(self, bounded_run: dict) -> None:
        # The documented gate command checks (b) on the reference-model audit: it passes
        # exactly when that audit decided "forgotten" (its bound below the margin).
        gate = next(r for c, r in bounded_run["runs"].items() if "--compliance_gate True" in c)
        forgotten = bounded_run["b"]["refmodel"]["decision"] == "forgotten"
        assert (gate.returncode == 0) == forgotten, gate.stderr[-3000:]
        if not forgotten:
            assert "ComplianceError" in gate.stderr and "p_member" in gate.stderr
        # (a) remembers: the gate stops it, naming the reference-model audit.
        run_a = run_evaluation(bounded_run, "a", "--compliance_gate True --output_dir eval/gate_a")
        assert run_a.returncode != 0 and "ComplianceError" in run_a.stderr
        message = _gate_message(run_a)
        assert "p_member" in message and "rho_KS" not in message, message
        # The papers' auditors on request: --gate_refmodel False --gate_ema True checks EMA
        # alone; it lets (b) pass and still stops (a).
        ema_only = "--compliance_gate True --gate_refmodel False --gate_ema True --overwrite True"
        run_b = run_evaluation(bounded_run, "b", ema_only, "--output_dir eval/gate_b")
        assert run_b.returncode == 0, run_b.stderr[-3000:]
        run_a = run_evaluation(bounded_run, "a", ema_only, "--output_dir eval/gate_a")
        assert run_a.returncode != 0
        message = _gate_message(run_a)
        assert "rho_EMA" in message and "rho_KS" not in message
        # The metrics were written before the gate stopped the run.
        gate_metrics = json.loads(
            (bounded_run["root"] / "eval" / "gate_a" / "metrics.json").read_text()
        )
        assert gate_metrics["metrics"]["rho_KS"] == pytest.approx(
            bounded_run["a"]["ks"]["statistic"]
        )

    def test_bounded_run_saves_the_best_validation_epoch(self, bounded_run: dict) -> None:
        """Issue 16 item 12: the saved model is the best validation epoch (the later one on
        ties), not the last; the loss and metrics are logged for TensorBoard."""
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        root = bounded_run["root"]
        summary = json.loads((root / "models" / "model_train.json").read_text())
        saved = summary["checkpoint"]
        scalars: dict[str, dict[int, float]] = {}
        for events in (root / "logs" / "model").glob("events.out.tfevents.*"):
            accumulator = EventAccumulator(str(events))
            accumulator.Reload()
            for tag in accumulator.Tags()["scalars"]:
                for event in accumulator.Scalars(tag):
                    scalars.setdefault(tag, {})[event.step] = event.value
        per_epoch = scalars[saved["key_metric"]]
        interval = BOUNDED[bounded_run["bundle"]]["design"].get("val_interval", 1)
        assert sorted(per_epoch) == list(range(interval, summary["epochs"] + 1, interval))
        best = max(per_epoch.values())
        assert saved["epoch"] == max(e for e, v in per_epoch.items() if v == best)
        assert saved["value"] == pytest.approx(best, rel=1e-6)
        assert "train_loss" in scalars and len(scalars["train_loss"]) >= summary["iterations"]
        assert summary["train_metrics"]["train_loss"] > 0
        last = per_epoch[summary["epochs"]]
        print(f"{bounded_run['bundle']}: saved epoch {saved['epoch']} of {summary['epochs']}, "
              f"{saved['key_metric']} {saved['value']:.4f} (last epoch {last:.4f})")  # fmt: skip

    def test_multi_process_training_keeps_the_single_process_budget(self, bounded_run: dict):
        """Issue 34, item 9: the multi-GPU config sampled one pass over the data per epoch,
        dropping steps_per_epoch; its 2 processes now share the same images per epoch."""
        import math

        root, design = bounded_run["root"], BOUNDED[bounded_run["bundle"]]["design"]
        single = json.loads((root / "models" / "model_train.json").read_text())
        ddp = json.loads((root / "models" / "model_ddp_train.json").read_text())
        assert single["iterations_per_epoch"] == design["steps_per_epoch"]
        assert ddp["iterations_per_epoch"] == math.ceil(design["steps_per_epoch"] / 2)

    def test_bounded_run_has_the_monai_workflow_properties(
        self, bounded_run: dict, tmp_path: Path
    ) -> None:
        """MONAI's ConfigWorkflow finds every required property, dataset_dir included."""
        from monai.bundle import ConfigWorkflow

        root = bounded_run["root"]
        settings = BOUNDED[bounded_run["bundle"]]
        overrides = {**settings["subset"], **settings["shape"], "bundle_root": str(root),
                     "output_dir": str(tmp_path / "eval")}  # fmt: skip
        for files, kind in (
            ([root / "configs" / "train.json"], "train"),
            ([root / "configs" / "train.json", root / "configs" / "evaluate.json"], "train"),
            ([root / "configs" / "inference.json"], "infer"),
        ):
            workflow = ConfigWorkflow(
                config_file=[str(f) for f in files],
                meta_file=str(root / "configs" / "metadata.json"),
                workflow_type=kind,
                ckpt_file=str(tmp_path / "unused.pt"),
                **overrides,
            )
            workflow.initialize()
            assert workflow.check_properties() == [], files
            assert workflow.dataset_dir == str(root) + "/data"

"""``monai-forget memorisation score|scan``: evidence that a model memorised a feature or name?

- ``score``: the black-box score M (Hartley & Tsaftaris 2022, Eq. 1) of one feature
  (text in the project's typeface at a known place), ranked among decoys of its kind
  (the calibrated test), with the paper's and the other one-tailed tests beside; with
  ``--reference-model``, also judged against M on models trained without the feature.
- ``scan``: M and the calibrated p for every name of a CSV roster against fresh decoys,
  corrected for multiple testing, ranked, with a JSON + HTML report; with
  ``--reference-patients``, against references trained on halves of the patients.
- ``split-patients``: those halves, one patient list per reference model.
"""

from __future__ import annotations

import argparse

from monai_forget.cli.memorisation_run import run
from monai_forget.cli.options import (
    add_bundle_set_argument,
    add_model_arguments,
    add_run_arguments,
    parameter_type,
    text_value,
)
from monai_forget.defaults import (
    LEAK_SCAN_ALPHA,
    LEAK_SCAN_CORRECTIONS,
    LEAK_SCAN_DECOY_SOURCES,
    LEAK_SCAN_STATISTICS,
    MEMORISATION_ALPHA,
    MEMORISATION_PAPER_TEST,
    MEMORISATION_RANDOM_FEATURES,
    MEMORISATION_SCORE_DECOYS,
    MEMORISATION_TESTS,
)


def _common(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser, "audited")
    parser.add_argument(
        "--probes",
        required=True,
        help="out-of-distribution probe images: folder, .npz or datalist .json",
    )
    parser.add_argument("--probes-split", help="split of a MedMNIST-layout .npz for the probes")
    parser.add_argument(
        "--position",
        type=int,
        nargs=2,
        default=(1, 1),
        metavar=("ROW", "COL"),
        help="top-left pixel of the text (default %(default)s)",
    )
    parser.add_argument(
        "--scale",
        type=int,
        default=1,
        help="glyph magnification: N gives 5*N-pixel rows (default %(default)s)",
    )
    parser.add_argument(
        "--value",
        type=text_value,
        help="pixel value of the text, or 'max' (default 1.0; with --bundle 'max', the "
        "injector's rule: each probe's white)",
    )
    parser.add_argument(
        "--random-feature",
        choices=MEMORISATION_RANDOM_FEATURES,
        default=MEMORISATION_RANDOM_FEATURES[0],
        help="random controls z_r: the text's block overwritten with random pixels (patch, "
        "the paper's), random masks with the text's ink count (ink), or random letters "
        "(text) (default %(default)s)",
    )
    parser.add_argument(
        "--decoy-seed",
        type=int,
        help="seed of the decoys (default: a fresh one, recorded in the output)",
    )
    add_run_arguments(parser, "seed of the random controls", batch_size=True, batch_by_device=True)
    parser.add_argument(
        "--training-data", help="in-distribution images (warns about probes identical to them)"
    )
    parser.add_argument("--training-split", help="split of a MedMNIST-layout .npz")
    parser.add_argument(
        "--outputs",
        choices=("logits", "probs"),
        default="logits",
        help="what the model returns: logits (a softmax is applied) or probabilities "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--reference-model",
        action="append",
        metavar="PATH",
        help="a model trained by the audited model's recipe without the feature or any roster "
        "name (same --network); repeat for each, at least 2 (the benchmarks used 8). M is "
        "then judged against theirs, which removes what the text does to any model of the "
        "design",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace existing outputs")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "memorisation", help="has a model memorised a unique feature or a patient's name?"
    )
    actions = parser.add_subparsers(dest="action", required=True)
    score = actions.add_parser(
        "score", help="memorisation score M of one feature (Hartley & Tsaftaris 2022)"
    )
    _common(score)
    score.add_argument("--text", required=True, help="the feature's text, e.g. a name or 'A'")
    score.add_argument(
        "--decoys",
        type=int,
        default=MEMORISATION_SCORE_DECOYS,
        help="random texts of the same kind to rank M among, the calibrated test (default "
        "%(default)s; all of them when fewer exist, e.g. 25 for one letter; 0: the "
        "uncalibrated tests only)",
    )
    score.add_argument(
        "--test",
        choices=MEMORISATION_TESTS,
        default=MEMORISATION_PAPER_TEST,
        help="primary uncalibrated one-tailed test (default %(default)s, the paper's); all "
        "are reported",
    )
    score.add_argument(
        "--alpha",
        type=parameter_type("alpha"),
        default=MEMORISATION_ALPHA,
        help="significance level (default %(default)s)",
    )
    score.add_argument("--out", help="write the result as JSON to this file")
    scan = actions.add_parser("scan", help="leak scan over a CSV roster of candidate names")
    _common(scan)
    names = scan.add_mutually_exclusive_group(required=True)
    names.add_argument("--roster", help="CSV with a header row, one name per row")
    names.add_argument(
        "--name",
        help="one name alone (a data team checking one patient's name): no correction over "
        "a roster, the name's own --alpha",
    )
    scan.add_argument(
        "--bundle",
        help="the model's MONAI bundle: --probes is then a folder of images its inference "
        "loader reads, every text is burned on their grid (--position and --scale in their "
        "pixels) and reaches the model through the bundle's preprocessing, as a burned-in "
        "name would",
    )
    add_bundle_set_argument(scan)
    scan.add_argument(
        "--canary-manifest",
        help="the .manifest.json of canary inject: burn the texts where and at the scale it "
        "burned its canaries (instead of --position and --scale)",
    )
    scan.add_argument(
        "--font",
        help="with --bundle: names in a TrueType font (a file or a font matplotlib bundles, e.g. "
        "DejaVuSans), anti-aliased as canary inject --font burns them (default: the 5x5 typeface)",
    )
    scan.add_argument(
        "--font-size", type=int, metavar="PX", help="with --font: pixels per em (default 12)"
    )
    scan.add_argument("--column", help="roster column holding the names (default 'name')")
    scan.add_argument(
        "--patient-column",
        help="roster column holding each name's patient ID (needed with --reference-patients)",
    )
    scan.add_argument(
        "--reference-patients",
        action="append",
        metavar="PATH",
        help="the patients a --reference-model trained on: a text file, one patient ID per "
        "line (see split-patients); repeat once per --reference-model, in the same order. "
        "Each name is then judged against the references that never saw its patient, so "
        "the references need not be trained without the roster",
    )
    decoys = scan.add_mutually_exclusive_group()
    decoys.add_argument(
        "--decoys",
        type=int,
        help="a fixed number of decoys per kind of name (length and letter case), every name "
        "ranked among all of them (default: sequential decoys, drawn until each name's "
        "decision is settled, up to --max-decoys; with reference models at least 999)",
    )
    decoys.add_argument(
        "--max-decoys",
        type=int,
        metavar="N",
        help="the sequential decoys' cap per kind of name (default: twice the fixed default, "
        "1998 for up to 50 names at alpha 0.05); a name the cap cannot settle is reported "
        "undecided, with the decoys that would",
    )
    scan.add_argument(
        "--decoys-from",
        choices=LEAK_SCAN_DECOY_SOURCES,
        default=LEAK_SCAN_DECOY_SOURCES[0],
        help="names: real given and family names of the same lengths and case; letters: "
        "random letters of each name's kind, more power but more false alarms (measured: "
        "docs/memorisation.md) (default %(default)s)",
    )
    scan.add_argument(
        "--statistic",
        choices=LEAK_SCAN_STATISTICS,
        help="what each name is ranked by among its decoys: m (Eq. 1, the paper's) or "
        "class-shift (the rise in log-probability of the class the name raises most) "
        "(default: class-shift with --bundle, whose control scans met the false-alarm "
        "target there, m without; measured: docs/memorisation.md)",
    )
    scan.add_argument(
        "--no-attribution",
        action="store_true",
        help="keep every flagged name as flagged (by default, when several are flagged, "
        "each is tested against its likeness to the others, and names explained by "
        "another's likeness are set aside)",
    )
    scan.add_argument(
        "--test",
        choices=MEMORISATION_TESTS,
        default=MEMORISATION_PAPER_TEST,
        help="uncalibrated one-tailed test reported beside each name (default "
        "%(default)s, the paper's)",
    )
    scan.add_argument(
        "--correction",
        choices=LEAK_SCAN_CORRECTIONS,
        default=LEAK_SCAN_CORRECTIONS[0],
        help="multiple-testing correction of the calibrated p-values: bh Benjamini-Hochberg, "
        "bonferroni, none (default %(default)s)",
    )
    scan.add_argument(
        "--alpha",
        type=parameter_type("alpha"),
        default=LEAK_SCAN_ALPHA,
        help="level of the corrected p-values (default %(default)s)",
    )
    scan.add_argument(
        "--out",
        required=True,
        help="output folder for leak_scan.json and leak_scan.html; the scan saves its "
        "progress there (leak_scan.partial.npz) and, run again after an interruption, "
        "resumes from it",
    )
    split = actions.add_parser(
        "split-patients",
        help="split the training patients in halves for the reference models of a leak scan",
    )
    split.add_argument(
        "--patients",
        required=True,
        help="text file of the audited model's training patient IDs, one per line (one per "
        "image is fine)",
    )
    split.add_argument(
        "--pairs",
        type=int,
        default=4,
        help="splits in halves: 2 references each; each name is judged against one of each "
        "pair (default %(default)s: 8 references, as measured)",
    )
    split.add_argument(
        "--seed", type=int, default=0, help="seed of the splits (default %(default)s)"
    )
    split.add_argument(
        "--out",
        required=True,
        help="folder for reference_<k>_patients.txt: train reference k of the audited "
        "model's recipe on those patients' images",
    )
    split.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    parser.set_defaults(func=run)

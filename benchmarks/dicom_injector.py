"""Throughput of the DICOM canary injector against a plain pydicom read + write.

Builds a temporary folder of real slices (ACDC cine-MR slices from the SSL4MIS h5
files under ``$MONAI_FORGET_DATA/acdc_ssl4mis/data``, written as 12-bit MONOCHROME2
DICOM with pydicom; or, without that data, copies of pydicom's bundled real CT/MR files
with fresh UIDs), then times, over the same files:

* baseline: ``pydicom.dcmread`` + ``Dataset.save_as`` per file;
* the same read + write through ``monai_forget.io.atomic_write`` (temporary file,
  fsync, rename: the project's policy for every output), to separate I/O policy from
  the injector's own work;
* injector: ``inject_file`` per file (decode, burn in, re-encode, tags, atomic write
  with fsync, output sha256), and ``inject_tree`` in ``--all`` mode (adds staging and
  the folder walk).

Prints files/s and the ratio of times (target <= 1.5x). Nothing is copied into the
repository; the temporary folder is deleted at the end.

Usage: ``python benchmarks/dicom_injector.py [--n 500] [--repeats 2]``
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pydicom
from pydicom.data import get_testdata_file
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, MRImageStorage, generate_uid

from monai_forget.data import data_root
from monai_forget.dicom import BurnInOptions, inject_file, inject_tree
from monai_forget.io import atomic_write


def acdc_slices(n: int) -> list[Path]:
    """Up to ``n`` ACDC 2D slice files, or an empty list when the data is absent."""
    folder = data_root() / "acdc_ssl4mis" / "data"
    if not folder.is_dir():
        return []
    return sorted(folder.glob("patient*_frame*_slice_*.h5"))[:n]


def write_acdc_dicom(h5_files: list[Path], out: Path) -> None:
    """Write each ACDC slice as a 12-bit MR DICOM with a display window."""
    import h5py

    study, series = generate_uid(), generate_uid()
    for i, path in enumerate(h5_files):
        with h5py.File(path) as f:
            image = np.asarray(f["image"], dtype=np.float32)
        ds = Dataset()
        ds.file_meta = FileMetaDataset()
        ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds.SOPClassUID = MRImageStorage
        ds.SOPInstanceUID = generate_uid()
        ds.file_meta.MediaStorageSOPClassUID = MRImageStorage
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study, series
        ds.Modality = "MR"
        ds.PatientName = f"ACDC^{path.stem.split('_')[0].upper()}"
        ds.PatientID = path.stem.split("_")[0]
        ds.InstanceNumber = i + 1
        ds.ImageType = ["ORIGINAL", "PRIMARY", "M"]
        ds.WindowCenter, ds.WindowWidth = 1600, 3200
        pixels = np.clip(np.rint(image * 4095), 0, 4095).astype(np.uint16)
        ds.set_pixel_data(pixels, "MONOCHROME2", 12, generate_instance_uid=False)
        ds.save_as(out / f"{i:05d}.dcm", enforce_file_format=True)


def write_pydicom_copies(n: int, out: Path) -> None:
    """Copies of pydicom's bundled real slices with fresh UIDs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sources = [get_testdata_file(name) for name in ("CT_small.dcm", "MR_small.dcm")]
    for i in range(n):
        ds = pydicom.dcmread(sources[i % len(sources)])
        ds.SOPInstanceUID = generate_uid()
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.save_as(out / f"{i:05d}.dcm", enforce_file_format=True)


def plain_copy(files: list[Path], out: Path) -> None:
    for path in files:
        pydicom.dcmread(path).save_as(out / path.name)


def atomic_copy(files: list[Path], out: Path) -> None:
    """Baseline with the project's write policy (temporary file, fsync, rename)."""
    for path in files:
        buffer = io.BytesIO()
        pydicom.dcmread(path).save_as(buffer)
        with atomic_write(out / path.name, "wb") as handle:
            handle.write(buffer.getvalue())


def injector(files: list[Path], out: Path) -> None:
    options = BurnInOptions(text="JOHN DOE")
    for path in files:
        inject_file(path, out / path.name, options)


def best_times(
    runs: dict[str, Callable[[list[Path], Path], None]],
    files: list[Path],
    work: Path,
    repeats: int,
) -> dict[str, float]:
    """Fastest of ``repeats`` runs per method, each into a fresh output folder.

    The methods take turns within each repeat, so a change in machine load (the CPU is
    shared) hits all of them alike.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            out = Path(tempfile.mkdtemp(dir=work))
            start = time.perf_counter()
            run(files, out)
            times[name].append(time.perf_counter() - start)
            shutil.rmtree(out)
    return {name: min(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=500, help="number of slices (>= 500)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="canary-bench-") as tmp:
        work = Path(tmp)
        src = work / "slices"
        src.mkdir()
        h5_files = acdc_slices(args.n)
        if len(h5_files) >= args.n:
            write_acdc_dicom(h5_files, src)
            what = f"{args.n} ACDC cine-MR slices (SSL4MIS h5) as 12-bit MONOCHROME2 DICOM"
        else:
            write_pydicom_copies(args.n, src)
            what = f"{args.n} copies of pydicom's CT_small/MR_small with fresh UIDs"
        files = sorted(src.glob("*.dcm"))
        shape = pydicom.dcmread(files[0]).pixel_array.shape
        print(f"data: {what}; first slice {shape[0]}x{shape[1]}")

        def tree(_files: list[Path], out: Path) -> None:
            inject_tree(src, out / "tree", BurnInOptions(text="JOHN DOE"), all_files=True)

        plain_copy(files, Path(tempfile.mkdtemp(dir=work)))  # warm the page cache
        best = best_times(
            {"plain": plain_copy, "atomic": atomic_copy, "file": injector, "tree": tree},
            files,
            work,
            args.repeats,
        )
        baseline, same_io, per_file, folder = (best[k] for k in ("plain", "atomic", "file", "tree"))

    n = len(files)
    print(f"plain pydicom read + write: {n / baseline:8.1f} files/s ({baseline:.2f} s)")
    print(
        f"read + atomic write (fsync): {n / same_io:7.1f} files/s ({same_io:.2f} s), "
        f"ratio {same_io / baseline:.2f}x"
    )
    print(
        f"inject_file per file:       {n / per_file:8.1f} files/s ({per_file:.2f} s), "
        f"ratio {per_file / baseline:.2f}x"
    )
    print(
        f"inject_tree --all:          {n / folder:8.1f} files/s ({folder:.2f} s), "
        f"ratio {folder / baseline:.2f}x (target <= 1.5x)"
    )
    print(
        f"injector vs read + atomic write: ratio {per_file / same_io:.2f}x "
        "(cost of decode, burn-in, re-encode and tags alone)"
    )


if __name__ == "__main__":
    main()

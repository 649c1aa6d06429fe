"""Inject and publish: the output and its manifest written together, or nothing.

:func:`inject_and_publish` is what ``monai-forget canary inject`` runs, for Python
users too: every check first (options, paths, that the manifest can be written, that
the output folder takes files), then the burned-in copies are staged, and only then are
the output and the manifest published, with SIGINT/SIGTERM/SIGHUP held until both are
written, so an interrupted run leaves either both or neither.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from monai_forget.dicom.driver import Prepared, check_not_input, prepare
from monai_forget.dicom.folder import inject_tree, stage_tree
from monai_forget.dicom.hashing import TextHasher
from monai_forget.dicom.legible import LegibilityCheck
from monai_forget.dicom.manifest import (
    check_manifest_target,
    manifest_paths,
    probe_folder,
    write_manifest,
)
from monai_forget.dicom.options import BurnInOptions
from monai_forget.dicom.record import ManifestRecord
from monai_forget.dicom.staging import signals_deferred

__all__ = ["Published", "inject_and_publish"]


@dataclass(frozen=True)
class Published:
    """What :func:`inject_and_publish` did.

    Attributes:
        records: one record per file (injected, copied or skipped, with the reason).
        manifest: the JSON and CSV manifest paths; ``None`` for a dry run.
    """

    records: list[ManifestRecord]
    manifest: tuple[Path, Path] | None


def inject_and_publish(
    source: str | os.PathLike,
    output: str | os.PathLike,
    options: BurnInOptions,
    *,
    hasher: TextHasher | None = None,
    manifest: str | os.PathLike | None = None,
    overwrite: bool = False,
    dry_run: bool = False,
    all_files: bool = False,
    canary: str | None = None,
    planted: Mapping[str, str] | None = None,
    workers: int | None = None,
    progress: Callable[[list[Path]], Iterable[Path]] | None = None,
    report: Callable[[str], object] | None = None,
    legibility: LegibilityCheck | None = None,
) -> Published:
    """Burn ``options``' text into ``source`` (a file or a folder) and publish the result
    at ``output`` with its manifest.

    Args:
        source: an image file (DICOM, NIfTI, PNG) or a folder of them.
        output: the output file or folder (a folder input mirrors its tree there; a file
            input written into ``output`` when it is a folder).
        options: what to burn in and where.
        hasher: how the text is recorded in the manifest (default: salted hash).
        manifest: manifest path prefix (default: ``output``).
        overwrite: replace existing outputs and manifest.
        dry_run: check and plan only; nothing is written.
        all_files, canary, planted, workers, progress, report: folder inputs only, as
            :func:`~monai_forget.dicom.folder.inject_tree` (workers default: the cores
            this process may use; report default: the package's logger).
        legibility: measure every canary at the model input before anything is
            published, record it in the manifest, and refuse illegible canaries unless
            the check allows them (:mod:`~monai_forget.dicom.legible`); not on a dry run
            of a folder (nothing is rendered).

    Raises:
        ValueError: options that contradict each other, or a manifest inside the input.
        FileExistsError: an output or the manifest exists and ``overwrite`` is false.
        InjectionError: a file cannot be injected, or a canary is not legible at the
            model input (nothing is published).
    """
    from monai_forget.processes import available_cores

    source, output = Path(source), Path(output)
    if canary is not None and all_files:
        raise ValueError(
            "`canary` (the one file to burn) and `all_files` (every file) are mutually "
            "exclusive: give one"
        )
    if not source.is_dir() and (canary is not None or all_files or planted is not None):
        raise ValueError(
            f"canary, all_files and planted canaries choose files of a folder; {source} is "
            "not a folder (they apply to folder inputs only)"
        )
    hasher = hasher or TextHasher()
    prefix = Path(manifest) if manifest is not None else output
    if source.is_dir():
        if source.resolve() in prefix.resolve().parents:
            raise ValueError("the manifest would be written inside the input folder")
    else:
        output = output / source.name if output.is_dir() else output
        for path in manifest_paths(prefix):
            check_not_input(source, path)
    if not dry_run:
        check_manifest_target(prefix, overwrite)
        probe_folder(output, "output")

    def publish(write: Callable[[], object], records: list[ManifestRecord]) -> Published:
        with signals_deferred():
            write()
            paths = write_manifest(records, prefix, hasher, overwrite=overwrite)
        return Published(records, paths)

    if not source.is_dir():
        prepared = prepare(source, output, options, overwrite=overwrite, hasher=hasher)
        records = [prepared.record.replace(output_sha256="")] if dry_run else [prepared.record]
        if legibility is not None:
            records = _legible_in_memory(legibility, prepared, records)
        if dry_run:
            return Published(records, None)
        return publish(functools.partial(prepared.write, overwrite), records)
    tree = {
        "all_files": all_files,
        "canary": canary,
        "planted": planted,
        "hasher": hasher,
        "workers": workers or available_cores(),
        "progress": progress,
        **({} if report is None else {"report": report}),
    }
    if dry_run:
        return Published(inject_tree(source, output, options, dry_run=True, **tree), None)
    with stage_tree(source, output, options, overwrite=overwrite, **tree) as staged:
        records = staged.records
        if legibility is not None:
            stage = staged.staging.path
            records = legibility.apply(
                records, lambda r: stage / Path(r.output).relative_to(output)
            )
        return publish(staged.publish, records)


def _legible_in_memory(
    check: LegibilityCheck, prepared: Prepared, records: list[ManifestRecord]
) -> list[ManifestRecord]:
    """The check on a single file's rendered bytes, read from a private temporary copy
    (the model's loader reads files), removed afterwards."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="monai-forget-legibility-") as folder:
        copy = Path(folder) / prepared.dst.name
        copy.write_bytes(prepared.payload)
        return check.apply(records, lambda _: copy)

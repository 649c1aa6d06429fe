"""Refuse a canary the model cannot read, before anything is published.

Each burned file (staged, or rendered in memory for a single file) and its original are
read by the model's own loader and passed through its preprocessing; the text's
legibility at the model input (:mod:`monai_forget.canary.legibility`) is recorded in the
manifest, and a canary that is not legible stops the run with the smallest lettering that
could be, unless the caller allows illegible canaries (then the manifest says so).

The preprocessing is passed in (a MONAI bundle's, built by the caller), so importing this
module loads neither torch nor MONAI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from monai_forget.canary.legibility import Legibility, measure_legibility, smallest_legible
from monai_forget.canary.lettering import TrueTypeLettering
from monai_forget.canary.orientation import loader_transposes
from monai_forget.canary.render import TextDoesNotFitError
from monai_forget.dicom.errors import InjectionError
from monai_forget.dicom.record import ManifestRecord, TextBox

__all__ = ["LegibilityCheck", "ModelInput", "TextAtModelInput", "check_texts"]


class ModelInput(Protocol):
    """The model's loader and preprocessing (e.g. ``memorisation.pipeline.Preprocessing``)."""

    def load(self, paths: Sequence[Any]) -> list[Any]: ...

    def __call__(self, image: Any) -> Any: ...


def cap_height_of(box: TextBox) -> float:
    """A capital's height on the acquisition grid, from the manifest's lettering."""
    if box.font:
        return float(TrueTypeLettering(box.font["font"], box.font["font_size"]).cap_height)
    return float(box.height)  # the 5x5 typeface: the box is one capital high


@dataclass(frozen=True)
class LegibilityCheck:
    """Measure each canary at the model input; refuse illegible ones unless allowed.

    Args:
        model_input: the model's loader and preprocessing (:class:`ModelInput`).
        allow_illegible: plant a canary that is not legible (the manifest says so).
    """

    model_input: ModelInput
    allow_illegible: bool = False

    def measure(self, source: Path, burned: Path, box: TextBox) -> tuple[Legibility, str]:
        """The canary's legibility, and the smallest lettering that could be legible."""
        before, after = self.model_input.load([source, burned])
        if getattr(before, "ndim", 0) != 3:
            raise InjectionError(
                f"{source}: the model's loader gives shape {tuple(before.shape)}; legibility "
                "is measured on 2-D images (C, H, W): check 3-D volumes slice by slice"
            )
        seen = measure_legibility(self.model_input, before, after, cap_height_of(box))
        grid = tuple(before.shape[-2:])
        if loader_transposes([source], [before]):
            grid = grid[::-1]  # the file's rows and columns
        font = box.font or {}
        hint = smallest_legible(
            seen.factor, grid, box.n_chars, (box.row, box.col), font.get("font"),
            font.get("font_size"),
        ).describe()  # fmt: skip
        return seen, hint

    def apply(
        self, records: list[ManifestRecord], readable: Callable[[ManifestRecord], Path]
    ) -> list[ManifestRecord]:
        """``records`` with each canary's legibility; ``readable(record)`` is where its
        burned file can be read now (staged or temporary).

        Raises:
            InjectionError: a canary is not legible and illegible canaries are not allowed.
        """
        out, illegible = [], []
        for record in records:
            if record.action != "injected" or record.box is None:
                out.append(record)
                continue
            seen, hint = self.measure(Path(record.input), readable(record), record.box)
            if not seen.legible:
                illegible.append((record, seen, hint))
            out.append(record.replace(legibility=seen.to_dict()))
        if illegible and not self.allow_illegible:
            record, seen, hint = illegible[0]
            raise InjectionError(
                f"the canary is not legible at the model input in {len(illegible)} of "
                f"{sum(r.action == 'injected' for r in records)} file(s); first, "
                f"{record.output}: {'; '.join(seen.shortfalls())}. The smallest lettering that "
                f"could be legible there: {hint}. Nothing was "
                "written; to plant it anyway, allow illegible canaries (allow_illegible; CLI: "
                "`allow_illegible`), and the manifest records legible: false"
            )
        return out


@dataclass(frozen=True)
class TextAtModelInput:
    """One text on one file, measured at the model input without planting it.

    Attributes:
        file: the image file.
        entry: the text's index in the list given (``None``: the file's PatientName).
        legibility: the measures (:class:`~monai_forget.canary.legibility.Legibility`);
            ``None`` when the injector refuses the text on this file (``refused``).
        hint: the smallest lettering and position that could be legible on this file.
        refused: why the injector refuses it (e.g. the text does not fit), else ``None``.
    """

    file: Path
    entry: int | None
    legibility: Legibility | None
    hint: str = ""
    refused: str | None = None

    @property
    def legible(self) -> bool:
        return self.legibility is not None and self.legibility.legible


def check_texts(
    files: Sequence[str | Path],
    texts: Sequence[str | None],
    options: Any,
    model_input: ModelInput,
) -> list[TextAtModelInput]:
    """Each text (``None``: the file's PatientName, as ``canary inject`` burns it) burned
    into each file exactly as the injector would, in memory, and measured at the model
    input; nothing is written but private temporary copies, removed at once.

    Args:
        files: image files the model's loader reads.
        texts: the texts (e.g. a roster's names); ``[None]`` for each file's own name.
        options: the injector's :class:`~monai_forget.dicom.options.BurnInOptions`
            (position, scale or font); its ``text`` is replaced by each of ``texts``.
        model_input: the model's loader and preprocessing.

    Raises:
        InjectionError: a file the injector cannot read (named); a text it refuses on
            one file (e.g. one that does not fit) is a row with ``refused`` instead.
    """
    import dataclasses
    import tempfile

    from monai_forget.dicom.driver import prepare

    check = LegibilityCheck(model_input, allow_illegible=True)
    out = []
    with tempfile.TemporaryDirectory(prefix="monai-forget-legibility-") as folder:
        for file in map(Path, files):
            for entry, text in enumerate(texts):
                target = Path(folder) / file.name
                burned = dataclasses.replace(options, text=text)
                index = None if text is None else entry
                try:
                    prepared = prepare(file, target, burned, overwrite=True)
                except InjectionError as err:
                    if not isinstance(err.__cause__, TextDoesNotFitError):
                        raise
                    out.append(TextAtModelInput(file, index, None, refused=str(err)))
                    continue
                prepared.write(overwrite=True, durable=False)
                seen, hint = check.measure(file, target, prepared.record.box)
                out.append(TextAtModelInput(file, index, seen, hint))
    return out

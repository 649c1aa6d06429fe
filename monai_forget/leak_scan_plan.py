"""A leak scan set up once (issue 67, item 3): what ``memorisation scan`` and a Python user
resolve before any model runs, checked when built.

- the names: one patient's (``name``) or a roster's (``roster``, its ``column`` and
  ``patient_column``), never both;
- where and how the canary was burned: the injector's manifest (``manifest``) when
  given, whose placement and font the scan takes (a ``font`` or ``font_size`` that is not
  the manifest's is refused with both named), else ``position``, ``scale``, ``font``;
- the value burned: ``"max"`` through a bundle (the pipeline's own brightest value),
  else 1.0, unless given;
- and, once the probes are read, that a bundle delivers them at the model input the
  canary was measured at (:meth:`LeakScanPlan.check_probes`).

Messages name the parameters in backticks (```roster```); the command line shows its
flags there instead (:func:`monai_forget.cli.as_flags`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monai_forget.dicom.manifest import check_model_input, manifest_placement
from monai_forget.memorisation import LeakScanConfig, read_roster

__all__ = ["LeakScanPlan"]


@dataclass(frozen=True)
class LeakScanPlan:
    """The names a leak scan scores, its configuration and the canary it looks for.

    Attributes:
        names: the candidate names (a :class:`~monai_forget.memorisation.Roster` when
            read from one, with its patients).
        config: the scan's :class:`~monai_forget.memorisation.LeakScanConfig`, the
            placement and font taken from the manifest when one was given.
        placement: the manifest's placement
            (:func:`~monai_forget.dicom.manifest.manifest_placement`), or ``None``.
        manifest: the manifest's path, or ``None``.
        through_bundle: the probes are read through a bundle's preprocessing.
    """

    names: Sequence[str]
    config: LeakScanConfig
    placement: dict | None = None
    manifest: str | None = None
    through_bundle: bool = False

    @classmethod
    def build(
        cls,
        *,
        name: str | None = None,
        roster: str | os.PathLike | None = None,
        column: str | None = None,
        patient_column: str | None = None,
        manifest: str | os.PathLike | None = None,
        position: tuple[int, int] = (1, 1),
        scale: int = 1,
        font: str | None = None,
        font_size: int | None = None,
        value: float | str | None = None,
        through_bundle: bool = False,
        **options: Any,
    ) -> LeakScanPlan:
        """Resolve and check a scan's names, canary and configuration (``options``: the
        rest of :class:`~monai_forget.memorisation.LeakScanConfig`).

        Raises:
            ValueError: both or neither of ``name`` and ``roster``; ``column`` or
                ``patient_column`` with a single ``name``; a manifest the injector did
                not write, or whose font is not the one given; a bad configuration.
            FileNotFoundError: no such roster or manifest.
        """
        if (name is None) == (roster is None):
            raise ValueError("give one `name` or a `roster` of names, not both or neither")
        if name is not None and (column or patient_column):
            raise ValueError("`column` and `patient_column` read a `roster`; drop them with `name`")
        names = [name] if name is not None else read_roster(roster, column, patient_column)
        placement = None
        if manifest is not None:
            placement = manifest_placement(manifest, font, font_size)
            position, scale = placement["position"], placement["scale"]
            font, font_size = placement["font"], placement["font_size"]
        if value is None:
            value = "max" if through_bundle else 1.0
        config = LeakScanConfig(position=tuple(position), scale=scale, font=font,
                                font_size=font_size, value=value, **options)  # fmt: skip
        return cls(names, config, placement, None if manifest is None else str(manifest),
                   through_bundle)  # fmt: skip

    def check_probes(self, probes: Any) -> None:
        """Refuse probes a bundle delivers at another model input than the one the
        manifest's canary was measured at (before any model runs)."""
        if self.placement is not None and self.through_bundle:
            check_model_input(self.placement, probes.clean().shape, self.manifest)

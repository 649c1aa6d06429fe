"""Provider (site) assignment of patients: site map, explicit lists, or a seeded random split.

The public ACDC release does not record which patients were scanned at 1.5 T and which at
3 T, so a field-strength provider split can only come from a site map supplied by the data
owner. The fallbacks are labelled in the datalist (``provenance.site_assignment``) so a
random split is never mistaken for a field-strength one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monai_forget.checks import COUNT, check_in
from monai_forget.data_prep.tables import read_csv_rows, read_id_lines

SITE_MAP = "site-map"
EXPLICIT = "explicit"
RANDOM = "random-stratified (not field strength)"
SOURCE = "source column"
SINGLE = "single provider"

#: the site of every patient when no provider option is given
DEFAULT_SITE = "all"

# Independent random streams for sites and splits: changing one option never reshuffles
# the other.
SITE_STREAM = 1


def _natural(text: str) -> list:
    """Sort key putting ``line 2`` before ``line 10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _preview(items: Sequence[str], limit: int = 5) -> str:
    items = sorted(items, key=_natural)
    more = f", ... ({len(items)} in all)" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


class Listed(tuple):
    """Patients read from a file, with where each was read (``FILE line N``), so errors
    can name the line rather than repeat what an arbitrary file holds."""

    where: dict[str, str]


def parse_provider(text: str) -> tuple[str, tuple[str, ...]]:
    """Parse ``NAME=p1,p2,...`` or ``NAME=@file`` (one patient per line) into a provider.

    Raises:
        ValueError: no ``=``, an empty name, or an empty patient list.
    """
    name, sep, members = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(
            f"`providers` {text!r}: expected NAME=patient001,patient002,... or NAME=@file"
        )
    members = members.strip()
    if members.startswith("@"):
        lines = read_id_lines(members[1:], what=f"patient list of provider {name!r}")
        patients = Listed(p for _, p in lines)
        patients.where = {p: f"{members[1:]} line {number}" for number, p in lines}
    else:
        patients = [p.strip() for p in members.split(",") if p.strip()]
    if not patients:
        raise ValueError(f"`providers` {text!r}: provider {name!r} lists no patients")
    return name, patients if isinstance(patients, Listed) else tuple(patients)


def read_site_map(path: str | Path) -> dict[str, str]:
    """Read a ``patient,site`` CSV (header required) into ``{patient: site}``.

    Raises:
        ValueError: a patient listed twice with different sites (names both lines).
    """
    return _site_map_lines(path)[0]


def _site_map_lines(path: str | Path) -> tuple[dict[str, str], dict[str, str]]:
    """``{patient: site}`` and ``{patient: "FILE line N"}`` of a site map (messages name
    the file and line, never the id)."""
    mapping: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for line, row in read_csv_rows(path, ("patient", "site"), what="site map"):
        patient, site = row["patient"], row["site"]
        if patient in mapping and mapping[patient] != site:
            raise ValueError(
                f"site map {path}, line {line}: its patient is given site {site!r} but line "
                f"{first_line[patient]} gave {mapping[patient]!r}; keep one row"
            )
        mapping.setdefault(patient, site)
        first_line.setdefault(patient, line)
    return mapping, {p: f"{path} line {n}" for p, n in first_line.items()}


@dataclass(frozen=True)
class SiteSpec:
    """How patients are assigned to providers; at most one method may be chosen.

    Attributes:
        site_map: CSV with columns ``patient,site`` from the data owner.
        providers: explicit ``(name, patients)`` lists.
        other_site: with ``providers``, the site of every patient not listed.
        random_sites: number of seeded random sites, stratified by the patient's stratum
            (pathology group, class label).
        from_source: use the dataset's own source column (COVIDx).
    """

    site_map: Path | None = None
    providers: tuple[tuple[str, tuple[str, ...]], ...] = ()
    other_site: str | None = None
    random_sites: int | None = None
    from_source: bool = False

    def __post_init__(self) -> None:
        chosen = [
            flag
            for flag, used in (
                ("`site_map`", self.site_map is not None),
                ("`providers`", bool(self.providers)),
                ("`random_sites`", self.random_sites is not None),
                ("`from_source`", self.from_source),
            )
            if used
        ]
        if len(chosen) > 1:
            raise ValueError(f"choose one provider option, not {' and '.join(chosen)}")
        if self.other_site is not None and not self.providers:
            raise ValueError("`other_site` only applies together with `providers`")
        if self.random_sites is not None:
            check_in("`random_sites`", self.random_sites, COUNT)

    @property
    def method(self) -> str:
        """The ``site_assignment`` label written into the datalist."""
        if self.site_map is not None:
            return SITE_MAP
        if self.providers:
            return EXPLICIT
        if self.random_sites is not None:
            return RANDOM
        if self.from_source:
            return SOURCE
        return SINGLE

    def assign(
        self,
        strata: Mapping[str, str],
        seed: int = 0,
        sources: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Return ``{patient: site}`` for every patient in ``strata``.

        Args:
            strata: ``{patient: stratum}``; the stratum (pathology group, class) balances
                the random split.
            seed: seed of the random split.
            sources: ``{patient: source}`` for ``from_source``.

        Raises:
            ValueError: unknown patients, unassigned patients, or a patient in two
                providers.
        """
        patients = set(strata)
        if self.site_map is not None:
            mapping, where = _site_map_lines(self.site_map)
            _check_covers(
                mapping, patients, f"site map {self.site_map}", hint="add a row", where=where
            )
            return {p: mapping[p] for p in sorted(patients)}
        if self.providers:
            return self._explicit(patients)
        if self.random_sites is not None:
            return random_sites(strata, self.random_sites, seed)
        if self.from_source:
            if sources is None:
                raise ValueError("`from_source`: this layout has no source column")
            return {p: sources[p] for p in sorted(patients)}
        return dict.fromkeys(sorted(patients), DEFAULT_SITE)

    def _explicit(self, patients: set[str]) -> dict[str, str]:
        mapping: dict[str, str] = {}
        where: dict[str, str] = {}
        seen_names: set[str] = set()
        for name, members in self.providers:
            where.update(getattr(members, "where", {}))
            if name in seen_names:
                raise ValueError(f"`providers` {name!r} given twice; merge its patient lists")
            seen_names.add(name)
            for patient in members:
                if patient in mapping and mapping[patient] != name:
                    raise ValueError(
                        f"patient {where.get(patient, patient)} is in providers "
                        f"{mapping[patient]!r} and {name!r}; a patient belongs to one provider"
                    )
                mapping[patient] = name
        if self.other_site is not None:
            if self.other_site in seen_names:
                raise ValueError(f"`other_site` {self.other_site!r} is also a `providers` name")
            for patient in patients - set(mapping):
                mapping[patient] = self.other_site
        _check_covers(
            mapping,
            patients,
            "`providers` lists",
            hint="list it or pass `other_site` NAME",
            where=where,
        )
        return {p: mapping[p] for p in sorted(patients)}


def _check_covers(
    mapping: Mapping[str, str],
    patients: set[str],
    what: str,
    hint: str,
    where: Mapping[str, str] | None = None,
) -> None:
    """Refuse a mapping naming patients not in the data or leaving data patients out.

    Patients read from a file (``where``) are named by file and line, not by content.
    """
    unknown = set(mapping) - patients
    if unknown:
        where = where or {}
        named = [where.get(p, p) for p in unknown]
        raise ValueError(
            f"{what} names {len(unknown)} patient(s) not in the data: {_preview(named)}; "
            f"patient ids look like {_preview(patients, 3)}"
        )
    unassigned = patients - set(mapping)
    if unassigned:
        raise ValueError(
            f"{what} leaves {len(unassigned)} patient(s) in no provider: "
            f"{_preview(unassigned)}; {hint}"
        )


def random_sites(strata: Mapping[str, str], n_sites: int, seed: int) -> dict[str, str]:
    """Seeded random provider split, stratified: each stratum is dealt round-robin.

    The dealing continues across strata, so site sizes differ by at most one.
    Sites are named ``random1`` ... ``randomN`` (never mistaken for a scanner).
    """
    rng = np.random.default_rng([seed, SITE_STREAM])
    by_stratum: dict[str, list[str]] = defaultdict(list)
    for patient, stratum in strata.items():
        by_stratum[stratum].append(patient)
    mapping: dict[str, str] = {}
    turn = 0
    for stratum in sorted(by_stratum):
        members = sorted(by_stratum[stratum])
        for index in rng.permutation(len(members)):
            mapping[members[index]] = f"random{turn % n_sites + 1}"
            turn += 1
    return {p: mapping[p] for p in sorted(mapping)}

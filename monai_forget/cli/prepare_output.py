"""What every ``monai-forget prepare`` layout does after collecting its samples: check
where the outputs go, build the datalist (providers, split, paths) and write it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from monai_forget.io import check_writable

if TYPE_CHECKING:  # the data_prep modules import numpy, nibabel, h5py...: only when run
    from monai_forget.data_prep.sites import SiteSpec


def check_output(args: argparse.Namespace) -> None:
    """Refuse an output that would replace a file or land inside the input release:
    ``prepare`` only reads its sources."""
    check_writable(args.output, args.overwrite)
    output = args.output.resolve()
    folders = [getattr(args, k, None) for k in ("image_dir", "dicom_dir")]
    written = [output, *(f.resolve() for f in folders if f)]
    source = getattr(args, "root", None)
    if source is not None and any(source.resolve() in w.parents for w in written):
        raise ValueError(
            f"the output would be written inside the input release {source}; prepare only "
            "reads its sources: write the datalist (and any exported images) elsewhere"
        )
    npz = getattr(args, "npz", None)
    if npz is not None and npz.resolve() in written:
        raise ValueError(f"the output {args.output} is the input {npz}; write it elsewhere")


def _site_spec(args: argparse.Namespace) -> SiteSpec:
    from monai_forget.data_prep.sites import SiteSpec, parse_provider

    return SiteSpec(
        site_map=args.site_map,
        providers=tuple(parse_provider(text) for text in args.provider or ()),
        other_site=args.other_site,
        random_sites=args.random_sites,
        from_source=getattr(args, "site_from_source", False),
    )


def _fractions(args: argparse.Namespace, keyword: str | None) -> tuple[float, float, float] | None:
    """``None`` for the layout's own split keyword, else the parsed fractions."""
    from monai_forget.data_prep.splits import parse_fractions

    if keyword is not None and args.split == keyword:
        return None
    return parse_fractions(args.split)


def label_names(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError(f"--label-names {text!r}: expected NAME0,NAME1,...")
    return names


def finish(
    args: argparse.Namespace,
    samples: list[dict[str, Any]],
    *,
    keyword: str | None,
    labels: Sequence[str],
    description: str,
    provenance: dict[str, Any],
    sources: dict[str, str] | None = None,
    before_write: Callable[[], None] | None = None,
) -> int:
    """Build, check and write the datalist; print a one-line summary per split."""
    from monai_forget.data_prep.datalist import PathStyle, build_datalist, write_datalist
    from monai_forget.data_prep.splits import SPLITS

    datalist = build_datalist(
        samples,
        sites=_site_spec(args),
        fractions=_fractions(args, keyword),
        seed=args.seed,
        labels=labels,
        paths=PathStyle.for_output(args.output, args.base_dir, args.absolute),
        description=description,
        provenance={"layout": args.layout, **provenance},
        sources=sources,
    )
    if before_write is not None:
        before_write()
    write_datalist(datalist, args.output, overwrite=args.overwrite)
    counts = datalist["provenance"]["counts"]
    print(f"wrote {args.output} (providers: {datalist['provenance']['site_assignment']})")
    for name in SPLITS:
        c = counts[name]
        print(f"  {name}: {c['entries']} entries, {c['patients']} patients, sites {c['sites']}")
    overlap = datalist["provenance"]["patients_in_several_splits"]
    if overlap:
        print(
            f"  warning: {len(overlap)} patient(s) appear in several source splits; "
            "pass --split TRAIN,VAL,TEST for a patient-level split"
        )
    return 0

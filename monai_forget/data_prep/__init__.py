"""Dataset layouts to MONAI datalist JSON with per-sample provenance.

One module per source layout (``acdc_nifti``, ``acdc_h5``, ``medmnist``, ``kermany``,
``covidx``, ``rsna``) turns a dataset folder into samples; ``sites`` assigns providers,
``splits`` makes the patient-level split and ``datalist`` assembles and writes the JSON
that ``monai.data.load_decathlon_datalist`` reads; ``reading`` turns an entry that
references a volume slice back into pixels. Sources are only ever read.
The ``monai-forget prepare`` sub-command (``monai_forget.cli.prepare``) drives them.
"""

from monai_forget.data_prep.datalist import PathStyle, build_datalist, write_datalist
from monai_forget.data_prep.sites import SiteSpec
from monai_forget.data_prep.splits import parse_fractions, split_patients

__all__ = [
    "PathStyle",
    "SiteSpec",
    "build_datalist",
    "parse_fractions",
    "split_patients",
    "write_datalist",
]

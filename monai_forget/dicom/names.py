"""DICOM person names as a viewer shows them."""

from __future__ import annotations

import unicodedata

from pydicom.valuerep import PersonName

from monai_forget.canary.font import unsupported_characters
from monai_forget.dicom.errors import InjectionError


def display_name(name: PersonName | str) -> str:
    """Return a DICOM person name in reading order, ``DOE^JOHN`` -> ``JOHN DOE``.

    Uses the alphabetic representation: prefix, given, middle and family names joined
    by spaces, then ``, suffix``. Accents are folded to ASCII (``Müller`` ->
    ``Muller``) because the typeface is ASCII.

    Raises:
        InjectionError: the name is empty or holds characters the typeface cannot
            draw (the message does not repeat the name: it is PHI).
    """
    pn = name if isinstance(name, PersonName) else PersonName(str(name))
    words = [pn.name_prefix, pn.given_name, pn.middle_name, pn.family_name]
    text = " ".join(w.strip() for w in words if w and w.strip())
    if pn.name_suffix and pn.name_suffix.strip():
        text = f"{text}, {pn.name_suffix.strip()}" if text else pn.name_suffix.strip()
    folded = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in folded if not unicodedata.combining(c))
    if not text:
        raise InjectionError("PatientName is empty; pass the text to burn in (`text`)")
    missing = unsupported_characters(text)
    if missing:
        raise InjectionError(
            f"PatientName has {len(missing)} character(s) outside the typeface "
            "(A-Z a-z 0-9 space ^ , . - '); pass the text explicitly (`text`)"
        )
    return text

"""The injector's refusal type."""

from __future__ import annotations


class InjectionError(ValueError):
    """An input the injector refuses, with the reason and the fix in the message.

    A ``ValueError`` so the command line prints it as a one-line error (exit code 2).
    """


class NotAnImageError(InjectionError):
    """The file is not a DICOM image at all (not DICOM, or no pixel data).

    Directory mode copies such files unchanged instead of stopping.
    """

"""Record burned-in text without turning the manifest into a new PHI leak."""

from __future__ import annotations

import hashlib
import hmac
import math
import os

from monai_forget.checks import Interval, check_in

#: A salt's length in bytes: enough that the hash resists guessing.
SALT_BYTES = Interval(8, math.inf, "left", integer=True)


class TextHasher:
    """Keyed hash (HMAC-SHA256) of canary text, or plain text on explicit request.

    The salt is never written anywhere. A random salt (the default) still lets a reader
    tell whether two files carry the same text within one run; pass your own secret
    salt to check later whether a given name is the canary.

    Args:
        salt: secret key; default 32 random bytes for this run.
        plain_text: record the text itself (only for non-PHI text such as a made-up
            canary name).
    """

    def __init__(self, salt: bytes | str | None = None, plain_text: bool = False) -> None:
        if isinstance(salt, str):
            salt = salt.encode("utf-8")
        if salt is not None:
            check_in("the salt's length (bytes)", len(salt), SALT_BYTES)
        self._salt = salt if salt is not None else os.urandom(32)
        self.plain_text = plain_text
        self.salt_source = "random per run (not stored)" if salt is None else "user-supplied"

    @property
    def field(self) -> str:
        """Manifest column holding the text."""
        return "text" if self.plain_text else "text_hmac_sha256"

    def __call__(self, text: str) -> str:
        if self.plain_text:
            return text
        return hmac.new(self._salt, text.encode("utf-8"), hashlib.sha256).hexdigest()

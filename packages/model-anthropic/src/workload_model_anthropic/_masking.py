"""Masking the API key in what a model server says (its error messages reach viewers).

A server may echo the key it was sent, and not always verbatim: lower-cased, upper-cased or
cut short ("Incorrect API key provided: sk-abc…xyz"). :func:`mask_secret` therefore hides, with
the case of ASCII letters ignored, every run of :data:`MIN_RUN` or more characters that also
occurs in the key, not just the whole key (ADR 0024). A key shorter than that is hidden where it
occurs whole.

The same rule as ``workload_model_openai._masking`` (a copy: the two adapters are independent
packages, neither imports the other; ADR 0028).
"""

from __future__ import annotations

import string

__all__ = ["MASK", "MIN_RUN", "mask_secret"]

MASK = "***"
MIN_RUN = 8
"""The shortest run of the key's characters that is masked (shorter ones are common words)."""
_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
"""ASCII case folding only: it keeps every index where it was (``str.lower`` may not)."""


def mask_secret(text: str, secret: str) -> str:
    """``text`` with every case-insensitive run of 8+ characters of ``secret`` as ``***``."""
    if not secret:
        return text
    folded, key = text.translate(_FOLD), secret.translate(_FOLD)
    width = min(MIN_RUN, len(key))
    pieces = {key[i : i + width] for i in range(len(key) - width + 1)}
    hidden = [False] * len(text)
    for start in range(len(folded) - width + 1):
        if folded[start : start + width] in pieces:
            hidden[start : start + width] = [True] * width
    out: list[str] = []
    for index, char in enumerate(text):
        if not hidden[index]:
            out.append(char)
        elif index == 0 or not hidden[index - 1]:
            out.append(MASK)
    return "".join(out)

"""What every model adapter shares: its key masked, its URL safe to show, an answer's shape read.

The adapters (``workload_model_openai``, ``workload_model_anthropic``) are independent packages;
neither imports the other. The rules they must apply alike live here, once: a server's message
quoted with the key cut out (ADR 0024), a base URL shown without user info or query, and the
checks that turn a 200 whose body is not an answer into :class:`MalformedAnswer` (reported as
``model_unavailable``). Pure functions: no I/O, no provider's package.
"""

from __future__ import annotations

import string
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "MASK",
    "MIN_RUN",
    "MalformedAnswer",
    "json_object",
    "mask_secret",
    "optional_string",
    "safe_url",
    "token_count",
]

MASK = "***"
MIN_RUN = 8
"""The shortest run of the key's characters that is masked (shorter ones are common words)."""
_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
"""ASCII case folding only: it keeps every index where it was (``str.lower`` may not)."""


def mask_secret(text: str, secret: str) -> str:
    """``text`` with every case-insensitive run of 8+ characters of ``secret`` as ``***``.

    A server may echo the key it was sent, and not always verbatim: lower-cased, upper-cased or
    cut short ("Incorrect API key provided: sk-abc…xyz"). So every run of :data:`MIN_RUN` or
    more characters that also occurs in the key is hidden, with the case of ASCII letters
    ignored, not just the whole key. A key shorter than that is hidden where it occurs whole.
    """
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


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment: what messages may show of it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class MalformedAnswer(Exception):
    """A 200 whose body is not the provider's answer; the message says what is wrong with it."""


def json_object(value: Any, where: str) -> dict[str, Any]:
    """``value`` if it is a JSON object.

    Raises:
        MalformedAnswer: it is not; the message names ``where``.
    """
    if not isinstance(value, dict):
        raise MalformedAnswer(f"{where} is not a JSON object")
    return value


def optional_string(value: Any, where: str) -> str | None:
    """``value`` if it is a string or None.

    Raises:
        MalformedAnswer: it is neither.
    """
    if value is not None and not isinstance(value, str):
        raise MalformedAnswer(f"{where} is not a string")
    return value


def token_count(usage: dict[str, Any], name: str) -> int:
    """``usage[name]`` as a count of tokens (absent: 0).

    Raises:
        MalformedAnswer: present but not a non-negative integer.
    """
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedAnswer(f"usage.{name} is not a count")
    return value

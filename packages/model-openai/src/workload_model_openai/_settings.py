"""Where the ``openai:<model>`` adapter sends its calls: base URL, key, timeout, checked.

:func:`from_environment` reads them from ``WORKLOAD_OPENAI_BASE_URL``,
``WORKLOAD_OPENAI_API_KEY`` and ``WORKLOAD_MODEL_TIMEOUT_SECONDS``; the composition root calls
it once with the process environment. The key is kept out of every ``repr`` and message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from workload_domain.agent.adapters import (
    MAX_TIMEOUT_SECONDS,
    key_problem,
    safe_url,
    timeout_problem,
)

__all__ = [
    "API_KEY_VARIABLE",
    "BASE_URL_VARIABLE",
    "DEFAULT_API_KEY",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_TIMEOUT_SECONDS",
    "TIMEOUT_VARIABLE",
    "OpenAIConfigError",
    "OpenAISettings",
    "from_environment",
    "safe_url",
]

BASE_URL_VARIABLE = "WORKLOAD_OPENAI_BASE_URL"
API_KEY_VARIABLE = "WORKLOAD_OPENAI_API_KEY"
TIMEOUT_VARIABLE = "WORKLOAD_MODEL_TIMEOUT_SECONDS"
DEFAULT_API_KEY = "unused"
"""Sent when no key is configured: local servers (Ollama, vLLM, llama.cpp) need none."""
DEFAULT_TIMEOUT_SECONDS = 120.0


class OpenAIConfigError(ValueError):
    """A base URL, key or timeout that cannot be used; the message names the setting."""


def _check_url(url: str, name: str) -> None:
    try:
        parts = urlsplit(url)
        _port = parts.port  # raises for a port that is not a number in range
    except ValueError:
        raise OpenAIConfigError(f"{name} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OpenAIConfigError(
            f"{name} must be an http:// or https:// URL with a host, "
            "such as http://127.0.0.1:11434/v1"
        )
    if any(c.isspace() or not c.isprintable() for c in url):
        raise OpenAIConfigError(f"{name} must not contain spaces or control characters")


def _check_key(key: str, name: str) -> None:
    # It travels in an HTTP header. The message never quotes it.
    if (problem := key_problem(key, name)) is not None:
        raise OpenAIConfigError(problem)


def _check_timeout(seconds: float, name: str) -> None:
    if (problem := timeout_problem(seconds, name)) is not None:
        raise OpenAIConfigError(problem)


@dataclass(frozen=True, slots=True)
class OpenAISettings:
    """Where and how to call an OpenAI-compatible server; checked when made.

    Raises:
        OpenAIConfigError: a URL that is not http(s) with a host, an empty key or one that is
            not printable ASCII, or a timeout outside (0, 3600] seconds.
    """

    base_url: str
    """The API's root, ending in ``/v1`` by the OpenAI convention."""
    api_key: str = field(default=DEFAULT_API_KEY, repr=False)
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    """The most one model call may take: connecting, sending, waiting and reading together."""

    def __post_init__(self) -> None:
        _check_url(self.base_url, "the base URL")
        _check_key(self.api_key, "the API key")
        _check_timeout(self.timeout_seconds, "the model timeout")


def from_environment(environ: Mapping[str, str]) -> OpenAISettings | None:
    """The settings in ``environ``, or None when ``WORKLOAD_OPENAI_BASE_URL`` is not set.

    An empty or unset key means :data:`DEFAULT_API_KEY`; an empty or unset timeout means
    :data:`DEFAULT_TIMEOUT_SECONDS`.

    Raises:
        OpenAIConfigError: a value that cannot be used, with the variable's name.
    """
    base_url = environ.get(BASE_URL_VARIABLE, "").strip()
    if not base_url:
        return None
    _check_url(base_url, BASE_URL_VARIABLE)
    api_key = environ.get(API_KEY_VARIABLE, "").strip() or DEFAULT_API_KEY
    _check_key(api_key, API_KEY_VARIABLE)
    raw_timeout = environ.get(TIMEOUT_VARIABLE, "").strip()
    timeout = DEFAULT_TIMEOUT_SECONDS
    if raw_timeout:
        try:
            timeout = float(raw_timeout)
        except ValueError:
            raise OpenAIConfigError(f"{TIMEOUT_VARIABLE} must be a number of seconds") from None
        _check_timeout(timeout, TIMEOUT_VARIABLE)
    return OpenAISettings(base_url, api_key, timeout)

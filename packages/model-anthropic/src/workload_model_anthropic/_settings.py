"""Where the Anthropic adapter sends its calls: base URL, key, timeout, checked.

The adapter reads no environment variable of its own: the service's model endpoints
(``WORKLOAD_MODEL_ENDPOINTS``, SPEC §11) say where an ``anthropic`` endpoint is and which
variable holds its key, and the composition root hands the values over. The key is kept out
of every ``repr`` and message.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from workload_domain.agent.adapters import (
    MAX_TIMEOUT_SECONDS,
    key_problem,
    safe_url,
    timeout_problem,
)

__all__ = [
    "DEFAULT_API_KEY",
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_TIMEOUT_SECONDS",
    "AnthropicConfigError",
    "AnthropicSettings",
    "safe_url",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Anthropic's API: the client adds ``/v1/messages`` to it."""
DEFAULT_API_KEY = "unused"
"""Sent when no key is given (a local gateway or a test server may need none; Anthropic does)."""
DEFAULT_TIMEOUT_SECONDS = 120.0


class AnthropicConfigError(ValueError):
    """A base URL, key or timeout that cannot be used; the message names the setting."""


def _check_url(url: str) -> None:
    if any(c.isspace() or not c.isprintable() for c in url):
        raise AnthropicConfigError("the base URL must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        _port = parts.port  # raises for a port that is not a number in range
    except ValueError:
        raise AnthropicConfigError("the base URL is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AnthropicConfigError(
            "the base URL must be an http:// or https:// URL with a host, "
            f"such as {DEFAULT_BASE_URL}"
        )


def _check_key(key: str) -> None:
    # It travels in an HTTP header. The message never quotes it.
    if (problem := key_problem(key, "the API key")) is not None:
        raise AnthropicConfigError(problem)


def _check_timeout(seconds: float) -> None:
    if (problem := timeout_problem(seconds, "the model timeout")) is not None:
        raise AnthropicConfigError(problem)


@dataclass(frozen=True, slots=True)
class AnthropicSettings:
    """Where and how to call the Anthropic Messages API; checked when made.

    Raises:
        AnthropicConfigError: a URL that is not http(s) with a host, an empty key or one that
            is not printable ASCII, or a timeout outside (0, 3600] seconds.
    """

    base_url: str = DEFAULT_BASE_URL
    """The API's root, without ``/v1`` (the client adds ``/v1/messages``)."""
    api_key: str = DEFAULT_API_KEY
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    """The most one model call may take: connecting, sending, waiting and reading together."""

    def __repr__(self) -> str:
        # Neither the key nor the URL's user info or query (a gateway's token may be there).
        return (
            f"AnthropicSettings(base_url={safe_url(self.base_url)!r}, "
            f"timeout_seconds={self.timeout_seconds!r})"
        )

    def __post_init__(self) -> None:
        _check_url(self.base_url)
        _check_key(self.api_key)
        _check_timeout(self.timeout_seconds)

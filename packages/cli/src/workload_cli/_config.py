"""Where the client commands connect, and with which token: flag > env > credentials file.

Typer resolves the first two: ``--url`` / ``--token`` (given before or after the command, the
one after it winning), else ``WORKLOAD_URL`` / ``WORKLOAD_TOKEN``; the names and the default
server are the SDK's (:mod:`workload_sdk.config`). :func:`resolve_config` takes what typer
resolved, with where it came from, and adds the last fallbacks.

The development credentials file is the ``credentials.json`` that ``workload serve`` writes in
its data directory in embedded mode (``{"url", "operator_token", "viewer_token",
"worker_token"}``; the ``url`` once that service serves, so it may be missing before). The
client commands take its operator token, ``workload worker`` its worker token. A token of the
file is used only when the resolved URL is the default local URL or the URL the file names, so
a development token is never sent to another server.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from workload_cli._datadir import credentials_path, data_dir
from workload_sdk.config import DEFAULT_BASE_URL

__all__ = [
    "OPERATOR_TOKEN",
    "WORKER_TOKEN",
    "ClientConfig",
    "ConfigError",
    "Given",
    "resolve_config",
]

OPERATOR_TOKEN = "operator_token"  # noqa: S105 - the key of the file's operator token
WORKER_TOKEN = "worker_token"  # noqa: S105 - the key of the file's worker token


class ConfigError(ValueError):
    """The configuration cannot work (e.g. a URL that is not http(s))."""


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """The resolved connection settings, and where each came from (for messages)."""

    url: str
    token: str | None
    url_source: str
    token_source: str


@dataclass(frozen=True, slots=True)
class Given:
    """A value given for a setting, and where (``--url``, ``WORKLOAD_URL``, … for messages)."""

    value: str
    source: str


@dataclass(frozen=True, slots=True)
class _DevCredentials:
    path: Path
    url: str | None
    token: str | None


def _normalized(url: str) -> str:
    return url.strip().rstrip("/")


def _checked(url: str, source: str) -> str:
    """The URL, if it is an absolute http(s) URL with a host (and a valid port)."""
    try:
        parts = urlsplit(url)
        valid = parts.scheme in {"http", "https"} and bool(parts.hostname)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        valid = False
    if not valid:
        raise ConfigError(f"the server URL {url!r} (from {source}) is not an http(s) URL")
    return url


def _read_credentials(environ: Mapping[str, str] | None, key: str) -> _DevCredentials | None:
    """The data directory's credentials file (its token ``key``), or None if unreadable."""
    try:
        path = credentials_path(data_dir(environ))
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    url, token = document.get("url"), document.get(key)
    return _DevCredentials(
        path,
        _normalized(url) if isinstance(url, str) and url else None,
        token if isinstance(token, str) and token else None,
    )


def resolve_config(
    *,
    url: Given | None,
    token: Given | None,
    environ: Mapping[str, str] | None = None,
    file_token: str = OPERATOR_TOKEN,
) -> ClientConfig:
    """Resolve the server URL and token.

    Args:
        url: The server given by a flag or the environment (as typer resolved ``--url`` and
            ``WORKLOAD_URL``), or None; an empty value counts as not given.
        token: The token given by a flag or the environment, or None (empty: not given).
        environ: The environment for ``WORKLOAD_DATA_DIR``, the credentials file's directory
            (default ``os.environ``).
        file_token: Which token of the credentials file to fall back on: ``operator_token``
            (the client commands) or ``worker_token`` (``workload worker``).

    Raises:
        ConfigError: the resolved URL is not an absolute http(s) URL.

    Returns:
        URL: the given one, else the credentials file's URL, else ``http://127.0.0.1:8080``.
        Token: the given one, else the credentials file's ``file_token`` when the URL is the
        default one or the file's; else none.
    """
    file: _DevCredentials | None = None

    def credentials() -> _DevCredentials | None:
        nonlocal file
        if file is None:
            file = _read_credentials(environ, file_token)
        return file

    if url is not None and url.value:
        resolved_url, url_source = _normalized(url.value), url.source
    elif (found := credentials()) is not None and found.url is not None:
        resolved_url, url_source = found.url, str(found.path)
    else:
        resolved_url, url_source = DEFAULT_BASE_URL, "default"

    _checked(resolved_url, url_source)
    if token is not None and token.value:
        return ClientConfig(resolved_url, token.value, url_source, token.source)
    found = credentials()
    if (
        found is not None
        and found.token is not None
        and resolved_url in {DEFAULT_BASE_URL, found.url}
    ):
        return ClientConfig(resolved_url, found.token, url_source, str(found.path))
    return ClientConfig(resolved_url, None, url_source, "none")

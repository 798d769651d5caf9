"""Where the client commands connect, and with which token: flag > env > credentials file.

The development credentials file is the ``credentials.json`` that ``workload serve`` writes in
its data directory in embedded mode (``{"url", "operator_token", "viewer_token"}``). Its token
is used only when the resolved URL is the default local URL or the URL the file names, so a
development token is never sent to another server.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from workload_cli._datadir import credentials_path, data_dir

__all__ = [
    "DEFAULT_URL",
    "TOKEN_ENV",
    "URL_ENV",
    "ClientConfig",
    "ConfigError",
    "resolve_config",
]

DEFAULT_URL = "http://127.0.0.1:8080"
URL_ENV = "WORKLOAD_URL"
TOKEN_ENV = "WORKLOAD_TOKEN"  # noqa: S105 - the name of a variable, not a secret


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


def _read_credentials(environ: Mapping[str, str]) -> _DevCredentials | None:
    """The data directory's credentials file, or None if it is missing or unreadable."""
    try:
        path = credentials_path(data_dir(environ))
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    url, token = document.get("url"), document.get("operator_token")
    return _DevCredentials(
        path,
        _normalized(url) if isinstance(url, str) and url else None,
        token if isinstance(token, str) and token else None,
    )


def resolve_config(
    *, url: str | None, token: str | None, environ: Mapping[str, str] | None = None
) -> ClientConfig:
    """Resolve the server URL and token.

    Args:
        url: ``--url`` (wins over everything).
        token: ``--token`` (wins over everything).
        environ: The environment (default ``os.environ``): ``WORKLOAD_URL``,
            ``WORKLOAD_TOKEN``, and ``WORKLOAD_DATA_DIR`` for the credentials file.

    Raises:
        ConfigError: the resolved URL is not an absolute http(s) URL.

    Returns:
        URL: flag, else ``WORKLOAD_URL``, else the credentials file's URL, else
        ``http://127.0.0.1:8080``. Token: flag, else ``WORKLOAD_TOKEN``, else the credentials
        file's operator token when the URL is the default one or the file's; else none.
    """
    env = os.environ if environ is None else environ
    file: _DevCredentials | None = None

    def credentials() -> _DevCredentials | None:
        nonlocal file
        if file is None:
            file = _read_credentials(env)
        return file

    if url:
        resolved_url, url_source = _normalized(url), "--url"
    elif env.get(URL_ENV):
        resolved_url, url_source = _normalized(env[URL_ENV]), URL_ENV
    elif (found := credentials()) is not None and found.url is not None:
        resolved_url, url_source = found.url, str(found.path)
    else:
        resolved_url, url_source = DEFAULT_URL, "default"

    _checked(resolved_url, url_source)
    if token:
        return ClientConfig(resolved_url, token, url_source, "--token")
    if env.get(TOKEN_ENV):
        return ClientConfig(resolved_url, env[TOKEN_ENV], url_source, TOKEN_ENV)
    found = credentials()
    if found is not None and found.token is not None and resolved_url in {DEFAULT_URL, found.url}:
        return ClientConfig(resolved_url, found.token, url_source, str(found.path))
    return ClientConfig(resolved_url, None, url_source, "none")

"""Named model endpoints (SPEC §11): ``WORKLOAD_MODEL_ENDPOINTS``, read once at start-up.

The variable is a JSON object, or ``@path`` to a JSON or TOML file (``.toml``: TOML, anything
else: JSON), whose keys are endpoint names and whose values say which provider serves them::

    {"local": {"provider": "openai", "base_url": "http://127.0.0.1:11434/v1"},
     "claude": {"provider": "anthropic", "api_key_env": "ANTHROPIC_API_KEY"}}

``WORKLOAD_OPENAI_BASE_URL`` (and ``WORKLOAD_OPENAI_API_KEY``) still define the endpoint
``openai``; defining it in both places is refused (ADR 0027). A key is read from the variable
``api_key_env`` names, at start-up: an unset or empty one is refused then, not at the first
call. Every message here names a variable, an endpoint or a field — never a key, and never
the document's text (a key pasted into it must not reach a log).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from workload_api.settings import Settings
from workload_domain.agent.spec import ENDPOINT_NAME_PATTERN
from workload_domain.jsonvalues import strict_loads

__all__ = [
    "ANTHROPIC_PACKAGE",
    "ENDPOINTS_VARIABLE",
    "PROVIDERS",
    "EndpointConfigError",
    "ModelEndpoint",
    "configured_endpoints",
    "model_endpoints",
]

ENDPOINTS_VARIABLE = "WORKLOAD_MODEL_ENDPOINTS"
PROVIDERS = ("openai", "anthropic")
ANTHROPIC_PACKAGE = "workload_model_anthropic"
"""The adapter of ``anthropic`` endpoints, imported only when one is configured."""
MAX_ENDPOINTS = 64
MAX_FILE_BYTES = 1 << 20
_FIELDS = frozenset({"provider", "base_url", "api_key_env"})
_NAME = re.compile(ENDPOINT_NAME_PATTERN)
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_MAX_URL = 2000


class EndpointConfigError(ValueError):
    """``WORKLOAD_MODEL_ENDPOINTS`` (or an endpoint's key) cannot be used; says which and why."""


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """A configured endpoint: its name, provider, where it is, and its key (if it has one)."""

    name: str
    provider: str
    base_url: str | None
    api_key: SecretStr | None = field(default=None, repr=False)
    """Read from the variable ``api_key_env`` named, at start-up; never logged."""


def _installed(package: str) -> bool:
    # Found, not imported: the package loads at the endpoint's first model call.
    return importlib.util.find_spec(package) is not None


def configured_endpoints(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[ModelEndpoint, ...]:
    """The endpoints of the service ``settings`` configure, keys read from ``environ``.

    ``environ`` defaults to the process environment; ``workload serve`` calls this before it
    starts anything, so that a bad configuration exits 2 at once.

    Raises:
        EndpointConfigError: as :func:`model_endpoints`.
    """
    return model_endpoints(
        settings.model_endpoints,
        os.environ if environ is None else environ,
        openai_base_url=settings.openai_base_url,
        openai_api_key=settings.openai_api_key,
    )


def model_endpoints(
    raw: str | None,
    environ: Mapping[str, str],
    *,
    openai_base_url: str | None = None,
    openai_api_key: SecretStr | None = None,
    installed: Callable[[str], bool] = _installed,
) -> tuple[ModelEndpoint, ...]:
    """The endpoints ``raw`` (the variable's value) and the §11 variables define, by name.

    ``installed`` says whether a package can be imported (without importing it).

    Raises:
        EndpointConfigError: a document that cannot be read or is not valid, an endpoint
            whose key variable is unset, empty or not printable ASCII, ``openai`` defined twice,
            or an ``anthropic`` endpoint without its adapter installed.
    """
    document = _document(raw.strip()) if raw and raw.strip() else {}
    if not isinstance(document, dict):
        raise EndpointConfigError(f"{ENDPOINTS_VARIABLE} must be a JSON (or TOML) object")
    if len(document) > MAX_ENDPOINTS:
        raise EndpointConfigError(f"{ENDPOINTS_VARIABLE} defines more than {MAX_ENDPOINTS}")
    endpoints = [_endpoint(name, entry, environ) for name, entry in document.items()]
    if openai_base_url:
        if "openai" in document:
            raise EndpointConfigError(
                "the endpoint 'openai' is defined twice: by WORKLOAD_OPENAI_BASE_URL and in "
                f"{ENDPOINTS_VARIABLE} (keep one)"
            )
        _check_url(openai_base_url, "WORKLOAD_OPENAI_BASE_URL")
        key = openai_api_key.get_secret_value().strip() if openai_api_key else ""
        if key and not _printable(key):
            raise EndpointConfigError(
                "WORKLOAD_OPENAI_API_KEY must be printable ASCII without spaces"
            )
        secret = SecretStr(key) if key else None
        endpoints.append(ModelEndpoint("openai", "openai", openai_base_url, secret))
    if any(e.provider == "anthropic" for e in endpoints) and not installed(ANTHROPIC_PACKAGE):
        raise EndpointConfigError(
            "an anthropic endpoint is configured but its adapter is not installed "
            "(install workload-model-anthropic)"
        )
    return tuple(endpoints)


def _document(raw: str) -> Any:
    if not raw.startswith("@"):
        return _json(raw, ENDPOINTS_VARIABLE)
    path = Path(raw[1:]).expanduser()
    where = f"{ENDPOINTS_VARIABLE} file {str(path)[:200]!r}"
    try:
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise EndpointConfigError(f"cannot read {where}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise EndpointConfigError(f"{where} is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EndpointConfigError(f"{where} is not UTF-8 text") from None
    if path.suffix.lower() != ".toml":
        return _json(text, where)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The parser says what and where ("… (at line 2, column 7)"), never quoting the text.
        raise EndpointConfigError(f"{where} is not valid TOML: {str(exc)[:200]}") from None


def _json(text: str, where: str) -> Any:
    try:
        return strict_loads(text)
    except json.JSONDecodeError as exc:
        raise EndpointConfigError(
            f"{where} is not valid JSON (line {exc.lineno}, column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:
        # Duplicate keys, NaN, numbers out of range: the message names the key, not a value.
        raise EndpointConfigError(f"{where} is not valid JSON: {str(exc)[:200]}") from None


def _endpoint(name: str, entry: Any, environ: Mapping[str, str]) -> ModelEndpoint:
    if not _NAME.fullmatch(name):
        raise EndpointConfigError(f"endpoint name {name[:40]!r} must match {ENDPOINT_NAME_PATTERN}")
    if name == "mock":
        raise EndpointConfigError("endpoint name 'mock' is the mock model's: choose another")
    where = f"endpoint {name!r}"
    if not isinstance(entry, dict):
        raise EndpointConfigError(f"{where} must be an object with a provider")
    unknown = sorted(str(k)[:40] for k in entry if k not in _FIELDS)
    if unknown:
        raise EndpointConfigError(
            f"{where} has unknown field(s) {', '.join(map(repr, unknown))} "
            f"(known: api_key_env, base_url, provider)"
        )
    provider = entry.get("provider")
    if provider not in PROVIDERS:
        raise EndpointConfigError(f"{where}: provider must be one of {', '.join(PROVIDERS)}")
    base_url = entry.get("base_url")
    if base_url is None and provider == "openai":
        raise EndpointConfigError(f"{where}: an openai endpoint needs a base_url")
    if base_url is not None:
        _check_url(base_url, where)
    variable = entry.get("api_key_env")
    key = None if variable is None else _key(variable, where, environ)
    return ModelEndpoint(name, provider, base_url, key)


def _check_url(url: Any, where: str) -> None:
    problem = f"{where}: base_url must be an http:// or https:// URL with a host"
    if not isinstance(url, str) or len(url) > _MAX_URL:
        raise EndpointConfigError(problem)
    if any(c.isspace() or not c.isprintable() for c in url):
        raise EndpointConfigError(
            f"{where}: base_url must not contain spaces or control characters"
        )
    try:
        parts = urlsplit(url)
        _port = parts.port  # raises for a port that is not a number in range
    except ValueError:
        raise EndpointConfigError(problem) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointConfigError(problem)


def _key(variable: Any, where: str, environ: Mapping[str, str]) -> SecretStr:
    if not isinstance(variable, str) or not _VARIABLE.fullmatch(variable):
        raise EndpointConfigError(f"{where}: api_key_env must be an environment variable's name")
    value = environ.get(variable)
    if value is None or not value.strip():
        raise EndpointConfigError(f"{where}: its key variable {variable} is not set")
    value = value.strip()
    if not _printable(value):
        raise EndpointConfigError(
            f"{where}: the key in {variable} must be printable ASCII without spaces"
        )
    return SecretStr(value)


def _printable(key: str) -> bool:
    # A key travels in an HTTP header.
    return all(c.isascii() and c.isprintable() and not c.isspace() for c in key)

"""The SDK's configuration names and defaults, in one public place.

:class:`~workload_sdk.Client` and :class:`~workload_sdk.AsyncClient` read ``WORKLOAD_URL`` and
``WORKLOAD_TOKEN`` for an argument not given, then fall back on these defaults; a worker
(``workload_worker``) reads ``WORKLOAD_WORKER_TOKEN`` instead of ``WORKLOAD_TOKEN``. The
``workload`` command declares its ``--url`` / ``--token`` options with the same variables and
the same default server, imported from here, so the two never disagree.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "TOKEN_ENV",
    "URL_ENV",
    "WORKER_TOKEN_ENV",
]

URL_ENV: Final = "WORKLOAD_URL"
"""The environment variable of the server's base URL."""

TOKEN_ENV: Final = "WORKLOAD_TOKEN"  # noqa: S105 - the name of a variable, not a secret
"""The environment variable of the bearer token."""

WORKER_TOKEN_ENV: Final = "WORKLOAD_WORKER_TOKEN"  # noqa: S105 - a variable's name
"""The environment variable of a worker's token (role ``worker``: claim and report attempts).

The clients never read it; the worker SDK (``workload_worker``) and ``workload worker`` do.
"""

DEFAULT_BASE_URL: Final = "http://127.0.0.1:8080"
"""The server when neither an argument nor ``WORKLOAD_URL`` names one (``workload serve``'s)."""

DEFAULT_TIMEOUT: Final = 30.0
"""Seconds per HTTP request."""

DEFAULT_MAX_RETRIES: Final = 2
"""How many times a read is retried after a transient failure (writes never are)."""

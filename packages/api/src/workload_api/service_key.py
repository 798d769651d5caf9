"""The deployment's key: the console's signing key, and the keys derived from it (ADR 0022, 0026).

``WORKLOAD_CONSOLE_SESSION_KEY`` when configured, else a random key the service keeps in its
database (``service_secrets``, ``console_session``), made by the first process that needs it.
Either way every replica and standby of one database holds the same key, across restarts, so
what is computed under it agrees between processes: console cookies and CSRF tokens, and
principal ids (:mod:`workload_api.auth`), whose key is derived from it with a label of its own
(an HMAC of the label under the key), so an id never doubles as a cookie's MAC.

The key is read once per process, at its first use, and kept: replacing it takes a restart.
"""

from __future__ import annotations

import hashlib
import hmac

from pydantic import SecretStr

from workload_domain.ports import SecretStore

__all__ = ["STORED_KEY_NAME", "ServiceKey"]

STORED_KEY_NAME = "console_session"
"""The ``service_secrets`` row that holds the key when none is configured."""


class ServiceKey:
    """The key of one deployment, and keys derived from it for one purpose each.

    Args:
        store: where the key is kept when none is configured.
        configured: ``WORKLOAD_CONSOLE_SESSION_KEY`` (None: the stored key).
    """

    def __init__(self, store: SecretStore, configured: SecretStr | None = None) -> None:
        self._store = store
        self._key = None if configured is None else configured.get_secret_value().encode("utf-8")
        self._derived: dict[str, bytes] = {}

    async def key(self) -> bytes:
        """The key itself (read from the store at the first call when not configured)."""
        if self._key is None:
            self._key = await self._store.secret(STORED_KEY_NAME)
        return self._key

    async def derived(self, label: str) -> bytes:
        """The key for one purpose: ``HMAC-SHA256(key, "workload derived key|" + label)``."""
        found = self._derived.get(label)
        if found is None:
            message = f"workload derived key|{label}".encode()
            found = hmac.new(await self.key(), message, hashlib.sha256).digest()
            self._derived[label] = found
        return found

"""The secret store port: secrets kept across restarts."""

from __future__ import annotations

from typing import Protocol

__all__ = ["SecretStore"]


class SecretStore(Protocol):
    """Secrets the service keeps across restarts (cursor keys, the console's session key)."""

    async def secret(self, name: str) -> bytes:
        """The random secret (32 bytes or more) kept under ``name``, made on first use."""
        ...

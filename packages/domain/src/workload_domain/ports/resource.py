"""The lifecycle port: something opened before use and closed after."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Resource"]


class Resource(Protocol):
    """Something with connections to open before use and to close after (a lifecycle)."""

    async def open(self) -> None:
        """Connect and check that the resource can be used; raise ``SystemFault`` if not."""
        ...

    async def close(self) -> None:
        """Release every connection (idempotent)."""
        ...

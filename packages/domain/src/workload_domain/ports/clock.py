"""Time: the clock port and the expiry of a block it bounds."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

__all__ = ["Clock", "Expiry"]


class Expiry(Protocol):
    """A block bounded by :meth:`Clock.cancel_at`; after it, whether its deadline cut it short."""

    @property
    def expired(self) -> bool:
        """Whether the deadline passed while the block ran (it was cancelled then)."""
        ...


class Clock(Protocol):
    """Time: the current instant, waiting until an instant, and bounding a block by one."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware UTC."""
        ...

    async def sleep_until(self, deadline: datetime) -> None:
        """Return once ``deadline`` has passed (at once if it already has); cancellable."""
        ...

    def cancel_at(self, deadline: datetime) -> AbstractContextManager[Expiry]:
        """A block cancelled (anyio) once ``deadline`` has passed; the cancellation ends there.

        Cheaper than racing the block against a :meth:`sleep_until` task: no task is started,
        and nothing is cancelled when the block finishes in time.
        """
        ...

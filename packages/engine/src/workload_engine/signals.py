"""Wake-ups for waiting claims: work was queued, look again (SPEC §10: not a polling tick)."""

from __future__ import annotations

import anyio

__all__ = ["WorkSignal"]


class WorkSignal:
    """A broadcast: every claim waiting now wakes when any attempt is queued.

    A claimer takes a :meth:`waiter` *before* it looks for work, and waits on it only if it
    found none: a notification between the two sets that waiter, so none is missed. Waiters
    claim again and wait again if they still find nothing, so a signal carries no payload.
    :meth:`close` wakes everyone for good (the service is stopping: long-polls answer now).
    """

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self.closed = False

    def waiter(self) -> anyio.Event:
        """The event the next notification sets."""
        if self._event is None:
            self._event = anyio.Event()
            if self.closed:
                self._event.set()
        return self._event

    def notify(self) -> None:
        """Wake every waiter (work was committed)."""
        event, self._event = self._event, None
        if event is not None:
            event.set()

    def close(self) -> None:
        """Wake every waiter now and from now on."""
        self.closed = True
        self.notify()

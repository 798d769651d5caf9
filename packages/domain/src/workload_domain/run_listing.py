"""The runs listing's order and filters (SPEC §6): newest or oldest first, a creation window.

Both stores page runs by the keyset ``(created_at, run_id)``; :class:`RunFilter` says which
runs a page holds and in which direction, and is what a runs cursor is bound to (its
:meth:`RunFilter.scope`): a cursor replayed with another order or other filters is refused.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from workload_domain.cursors import Position, Scope, to_micros
from workload_domain.records import RunRecord
from workload_domain.statuses import RunStatus

__all__ = ["RunFilter", "RunOrder"]


class RunOrder(enum.StrEnum):
    """The direction of the runs listing along ``(created_at, run_id)``."""

    ASC = "asc"
    DESC = "desc"


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs a listing holds, and in which order.

    ``created_after`` and ``created_before`` are exclusive bounds on ``created_at`` (aware
    datetimes, to the microsecond as the stores keep them).
    """

    workflow_id: str | None = None
    status: RunStatus | None = None
    order: RunOrder = RunOrder.ASC
    created_after: datetime | None = None
    created_before: datetime | None = None

    def scope(self) -> Scope:
        """What a cursor of this listing is bound to: every filter and the order."""
        return {
            "workflow_id": self.workflow_id,
            "status": self.status.value if self.status else None,
            "order": self.order.value,
            "created_after": _micros(self.created_after),
            "created_before": _micros(self.created_before),
        }

    def matches(self, run: RunRecord) -> bool:
        """Whether ``run`` belongs to the listing (for stores that filter in memory)."""
        return (
            (self.workflow_id is None or run.workflow_id == self.workflow_id)
            and (self.status is None or run.status is self.status)
            and (self.created_after is None or run.created_at > self.created_after)
            and (self.created_before is None or run.created_at < self.created_before)
        )

    def follows(self, position: Position, after: Position) -> bool:
        """Whether ``position`` comes after ``after`` in this listing's order."""
        return position < after if self.order is RunOrder.DESC else position > after


def _micros(instant: datetime | None) -> int | None:
    return None if instant is None else to_micros(instant)

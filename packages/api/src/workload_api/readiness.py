"""What ``/readyz`` answers: whether the service is ready, and what this process is (§12, §16).

A process is a ``leader`` (it holds the coordinator lock and executes every run, §7, §14), a
``standby`` (it serves the API while another leads) or a ``replica`` (it executes the runs of
the shards it holds, SPEC §16). Readiness is written by the lifecycle and the membership, and
read by ``/readyz``, ``GET /api/v1/status`` and the metrics.
"""

from __future__ import annotations

from datetime import datetime

__all__ = ["STOPPING", "UNAVAILABLE", "Readiness"]

UNAVAILABLE = "unavailable"
"""The readiness of a standby that cannot reach PostgreSQL (it keeps trying)."""
STOPPING = "stopping"
"""The readiness of a service that received its stop (it drains, then exits)."""


class Readiness:
    """Whether the service is ready and leads; ``/readyz`` answers it (503 before and after).

    ``leading`` is true while this process holds the coordinator lock and executes runs (the
    ``workload_coordinator_leader`` gauge); ``epoch`` is the coordinator epoch it leads in
    (None until fenced epochs exist, SPEC §14). A replica (§16) has a ``replica_id`` and owns
    ``shards_owned`` shards among ``replicas_live`` replicas.
    """

    def __init__(self, ready: bool = False) -> None:
        self.ready = ready
        self.reason = "starting"
        self.leading = False
        self.epoch: int | None = None
        self.replica_id: str | None = None
        """Set once this process joined a cluster of replicas (``--replica``)."""
        self.shards_total = 0
        """Every shard of the database, once this process leads (SPEC §16)."""
        self._replica_shards = 0
        self.replicas_live = 0
        """Live members of the cluster (a leader counts itself, alone)."""
        self.name: str | None = None
        """This process's name (its replica id, SPEC §16), once it serves."""
        self.since: datetime | None = None
        """When this process started to lead or joined its cluster."""

    @property
    def shards_owned(self) -> int:
        """The shards this process executes: a replica's, every one while it leads; none failed.

        Read with ``leading`` by the no-leader alert: a leader stopping or failed owns none.
        """
        if self.reason == "failed":
            return 0
        if self.replica_id is not None:
            return self._replica_shards
        return self.shards_total if self.leading else 0

    @shards_owned.setter
    def shards_owned(self, count: int) -> None:
        """A replica's count, as its membership holds them (a leader's is ``shards_total``)."""
        self._replica_shards = count

    @property
    def role(self) -> str:
        """``leader``, ``standby`` or ``replica`` (SPEC §12's and §16's ``/readyz``)."""
        if self.replica_id is not None:
            return "replica"
        return "leader" if self.leading else "standby"

    def set(self, ready: bool, reason: str) -> None:
        """Turn readiness on or off, with the reason ``/readyz`` shows."""
        self.ready = ready
        self.reason = reason

"""Who executes, sampled: the coordinator's epoch and leader, every shard's epoch and owner.

A thread reads the ``coordinator`` and ``shards`` tables directly (not through any service's
proxy) every ``interval`` seconds for the whole soak; a sample that cannot be read (PostgreSQL
is down) is skipped. From the samples come two checks and one measure:

- every epoch is monotone: the coordinator's, and each shard's, never go back;
- the *takeover* after a fault of process ``pid``: the first moment at which every shard (or,
  without ``--replica``, the coordinator) is held, under a live lease, by processes other than
  ``pid`` — execution is in other hands. A process's name ends with ``-<pid>`` (SPEC §16's
  default replica id), which is how samples name it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg

__all__ = ["Monitor", "Sample"]


@dataclass(frozen=True)
class Sample:
    """One reading: ``shards`` as (shard, epoch, owner or None while its lease is live)."""

    at: float  # time.monotonic()
    coordinator_epoch: int
    leader: str | None  # None when its lease has run out
    shards: tuple[tuple[int, int, str | None], ...]


class Monitor:
    """Samples the ownership tables of ``url`` until :meth:`stop`."""

    def __init__(self, url: str, replica_mode: bool, interval: float = 0.1) -> None:
        self._url = url
        self._replica_mode = replica_mode
        self._interval = interval
        self._stop = threading.Event()
        self.samples: list[Sample] = []
        self.errors = 0
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling (waits for the thread)."""
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self._stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self._url, autocommit=True, connect_timeout=2)
                self.samples.append(_read(conn))
            except psycopg.Error:
                self.errors += 1
                if conn is not None:
                    conn.close()
                conn = None
            self._stop.wait(self._interval)
        if conn is not None:
            conn.close()

    def regressions(self) -> list[list[Any]]:
        """Every epoch seen to go back: ``["coordinator"|shard, before, after, at]``."""
        found: list[list[Any]] = []
        for before, after in zip(self.samples, self.samples[1:], strict=False):
            if after.coordinator_epoch < before.coordinator_epoch:
                found.append(["coordinator", before.coordinator_epoch, after.coordinator_epoch])
            for (shard, old, _), (_, new, _) in zip(before.shards, after.shards, strict=True):
                if new < old:
                    found.append([shard, old, new])
        return found

    def takeover(self, pid: int, since: float, until: float) -> float | None:
        """When, after ``since``, execution was first wholly in hands other than ``pid``'s."""
        mine = f"-{pid}"
        for sample in self.samples:
            if sample.at < since or sample.at > until:
                continue
            if self._replica_mode:
                owners = [owner for _, _, owner in sample.shards]
                if owners and all(o is not None and not o.endswith(mine) for o in owners):
                    return sample.at
            elif sample.leader is not None and not sample.leader.endswith(mine):
                return sample.at
        return None

    def summary(self) -> dict[str, Any]:
        """How many samples, how many failed, the last epochs."""
        last = self.samples[-1] if self.samples else None
        return {
            "samples": len(self.samples),
            "unreadable": self.errors,
            "coordinator_epoch": last.coordinator_epoch if last else None,
            "shard_epochs_total": sum(e for _, e, _ in last.shards) if last else None,
        }


def _read(conn: psycopg.Connection[Any]) -> Sample:
    with conn.transaction():  # one snapshot for both tables
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        row = conn.execute(
            "SELECT epoch, CASE WHEN lease_expires_at > now() THEN leader END FROM coordinator"
        ).fetchone()
        shards = conn.execute(
            "SELECT shard, epoch, CASE WHEN lease_expires_at > now() THEN owner END"
            " FROM shards ORDER BY shard"
        ).fetchall()
    epoch, leader = row if row is not None else (0, None)
    return Sample(time.monotonic(), int(epoch), leader, tuple(shards))

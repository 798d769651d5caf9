"""Shards: how runs are split between replicas that all execute (SPEC §16).

A database's runs are partitioned into ``S`` shards (``shards_total``, fixed when the database
is first migrated) by a stable hash of the run id (:func:`shard_of`; the migration's
``workload_shard_of`` computes the same in SQL). A replica owns shards through leases kept in
PostgreSQL, each taken in a new *epoch* of its shard (:class:`ShardFence`), and live replicas
converge to ``⌊S/n⌋`` or ``⌈S/n⌉`` shards each (:func:`balance`, pure: every replica decides its
own moves from the same picture of the cluster).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = [
    "DEFAULT_SHARDS",
    "MAX_SHARDS",
    "REPLICA_ID_PATTERN",
    "ClusterPicture",
    "Member",
    "Moves",
    "ShardFence",
    "balance",
    "check_replica_id",
    "check_shards_total",
    "shard_of",
    "target_share",
]

DEFAULT_SHARDS = 64
"""``WORKLOAD_SHARDS`` when unset at the first migration."""
MAX_SHARDS = 4096
REPLICA_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
"""What a ``replica_id`` may be (``WORKLOAD_REPLICA_ID``): as a request id, safe in logs."""


def check_shards_total(total: int) -> int:
    """Return ``total`` if it is a valid shard count (1–4096), else raise ``ValueError``."""
    if isinstance(total, bool) or not isinstance(total, int) or not 1 <= total <= MAX_SHARDS:
        raise ValueError(f"the number of shards must be an integer from 1 to {MAX_SHARDS}")
    return total


def check_replica_id(replica_id: str) -> str:
    """Return ``replica_id`` if it matches :data:`REPLICA_ID_PATTERN`, else raise ``ValueError``."""
    if not REPLICA_ID_PATTERN.fullmatch(replica_id):
        raise ValueError("a replica id is 1 to 128 characters of A-Z, a-z, 0-9, '.', '_' and '-'")
    return replica_id


def shard_of(run_id: str, shards_total: int) -> int:
    """The shard of a run: the first 32 bits of the MD5 of its canonical id, modulo ``S``.

    Stable across processes, versions and platforms (never Python's ``hash``), and the same
    as the database's ``workload_shard_of(run_id, S)``. MD5 only spreads ids evenly here; it
    protects nothing.
    """
    digest = hashlib.md5(run_id.encode("ascii"), usedforsecurity=False).hexdigest()
    return int(digest[:8], 16) % shards_total


@dataclass(frozen=True, slots=True)
class ShardFence:
    """A shard as this replica holds it: its execution writes carry ``epoch`` (SPEC §16).

    A write of the shard passes only while ``epoch`` is the shard's current one; another
    replica taking the shard increments it, after every write in flight, so a replica that
    lost the shard (frozen past its lease, partitioned) cannot write to its runs again.
    """

    shard: int
    epoch: int


@dataclass(frozen=True, slots=True)
class Member:
    """A live replica as the database records it (``GET /api/v1/cluster``)."""

    replica_id: str
    started_at: datetime
    last_seen_at: datetime
    shards: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterPicture:
    """What a replica sees of the cluster at one lease renewal.

    ``members`` are the live replicas (this one included); ``free`` the shards nobody holds
    (never taken, released, or their owner's lease ran out); ``owned`` how many shards each
    live replica holds.
    """

    shards_total: int
    members: tuple[str, ...]
    free: tuple[int, ...]
    owned: dict[str, int]


@dataclass(frozen=True, slots=True)
class Moves:
    """What one replica does after a renewal: shards to take, shards to give up."""

    take: tuple[int, ...] = ()
    give: tuple[int, ...] = ()


def target_share(members: Sequence[str], me: str, shards_total: int) -> int:
    """How many shards ``me`` should own among ``members``: ``⌊S/n⌋`` or ``⌈S/n⌉``.

    Members are ranked by id; the first ``S mod n`` of them own one more. Every replica computes
    the same targets from the same members, so the shares always add up to ``S``.
    """
    ranked = sorted(set(members) | {me})
    base, extra = divmod(shards_total, len(ranked))
    return base + (1 if ranked.index(me) < extra else 0)


def balance(picture: ClusterPicture, me: str, mine: Collection[int]) -> Moves:
    """This replica's moves toward its share of the shards (SPEC §16).

    Below its share it takes free shards (lowest first); above it, it gives up its highest
    ones, which other replicas then take. It never takes a shard someone else holds: a
    replica over its share gives shards up itself (a graceful hand-off), and a dead one's
    leases run out. Shard 0, which carries the cluster's duties, is given up last.
    """
    target = target_share(picture.members, me, picture.shards_total)
    held = sorted(mine)
    if len(held) > target:
        # Highest first, shard 0 last: its duties move only when they must.
        order = sorted(held, key=lambda s: (s == 0, -s))
        return Moves(give=tuple(order[: len(held) - target]))
    if len(held) < target:
        wanted = target - len(held)
        return Moves(take=tuple(sorted(s for s in picture.free if s not in mine)[:wanted]))
    return Moves()

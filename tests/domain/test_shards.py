"""Shards (SPEC §16): the stable hash of a run id, shares, and how replicas converge to them."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload_domain.shards import (
    MAX_SHARDS,
    ClusterPicture,
    balance,
    check_replica_id,
    check_shards_total,
    shard_of,
    target_share,
)


def test_the_hash_of_a_run_id_never_changes() -> None:
    # Pinned: a change would move every existing run to another shard (and another owner).
    run_id = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    # md5(run_id) starts with 36efebac: 0x36efebac % 64 == 44, % 4096 == 0xbac == 2988.
    assert shard_of(run_id, 64) == 44
    assert shard_of(run_id, 1) == 0
    assert shard_of(run_id, 4096) == 2988
    assert shard_of(run_id, 7) == 0x36EFEBAC % 7


@pytest.mark.parametrize("total", [1, 2, 7, 64, 4096])
def test_shards_are_in_range_and_spread_evenly(total: int) -> None:
    rng = random.Random(total)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(20_000)]
    counts = Counter(shard_of(i, total) for i in ids)
    assert set(counts) <= set(range(total))
    if total <= 64:
        expected = len(ids) / total
        assert max(counts.values()) < expected * 1.25
        assert min(counts.values()) > expected * 0.75


@pytest.mark.parametrize("value", [0, -1, MAX_SHARDS + 1, 10**9, True, 1.5, "64", None], ids=repr)
def test_an_invalid_number_of_shards_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match="from 1 to 4096"):
        check_shards_total(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [1, 64, MAX_SHARDS])
def test_a_valid_number_of_shards_is_kept(value: int) -> None:
    assert check_shards_total(value) == value


@pytest.mark.parametrize(
    "value",
    ["", "a b", "host:1234", "a/b", "é", "x" * 129, "a\nb", "a\x00b", "../etc"],
    ids=repr,
)
def test_a_hostile_replica_id_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="replica id"):
        check_replica_id(value)


@pytest.mark.parametrize("value", ["a", "host-1234", "pod.ns_1-2", "x" * 128])
def test_a_valid_replica_id_is_kept(value: str) -> None:
    assert check_replica_id(value) == value


@given(st.integers(1, 4096), st.integers(1, 40))
def test_shares_are_floor_or_ceil_and_add_up(total: int, n: int) -> None:
    members = [f"r{i:02d}" for i in range(n)]
    shares = [target_share(members, m, total) for m in members]
    assert sum(shares) == total
    assert set(shares) <= {total // n, -(-total // n)}


def _picture(total: int, owners: dict[int, str], members: list[str]) -> ClusterPicture:
    owned = Counter(owners.values())
    free = tuple(s for s in range(total) if s not in owners)
    return ClusterPicture(total, tuple(sorted(members)), free, dict(owned))


def test_a_replica_below_its_share_takes_the_lowest_free_shards() -> None:
    picture = _picture(8, {0: "a", 1: "a", 2: "b"}, ["a", "b"])
    moves = balance(picture, "b", [2])
    assert moves.take == (3, 4, 5)
    assert moves.give == ()


def test_a_replica_above_its_share_gives_its_highest_shards_and_shard_0_last() -> None:
    picture = _picture(4, dict.fromkeys(range(4), "a"), ["a", "b", "c", "d"])
    moves = balance(picture, "a", [0, 1, 2, 3])
    assert moves.give == (3, 2, 1)
    assert moves.take == ()


def test_a_replica_at_its_share_does_nothing_and_never_takes_a_held_shard() -> None:
    owners = {s: ("a" if s < 4 else "b") for s in range(8)}
    assert balance(_picture(8, owners, ["a", "b"]), "a", [0, 1, 2, 3]) == balance(
        _picture(8, owners, ["a", "b"]), "b", [4, 5, 6, 7]
    )
    assert balance(_picture(8, owners, ["a", "b"]), "a", [0, 1, 2, 3]).take == ()
    # Alone with every shard held by others: it waits for them to give (nothing to take).
    assert balance(_picture(8, owners, ["a", "b", "c"]), "c", []).take == ()


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 300),
    st.lists(st.integers(0, 3), min_size=1, max_size=8),
    st.randoms(use_true_random=False),
)
def test_replicas_deciding_alone_converge_to_their_shares(
    total: int, joins: list[int], rnd: random.Random
) -> None:
    """Every replica applies its own moves on the same picture, round after round, in a
    random order; gives take effect at once (a hand-off that finished). They converge."""
    members: list[str] = []
    owners: dict[int, str] = {}
    for wave, count in enumerate(joins):
        members += [f"r{wave}-{i}" for i in range(count)]
        if not members:
            continue
        for _ in range(6):
            for me in rnd.sample(members, len(members)):
                mine = [s for s, o in owners.items() if o == me]
                moves = balance(_picture(total, owners, members), me, mine)
                for shard in moves.give:
                    del owners[shard]
                for shard in moves.take:
                    assert shard not in owners  # only free shards are taken
                    owners[shard] = me
        held = Counter(owners.values())
        assert len(owners) == total, "every shard is owned"
        for me in members:
            assert held[me] == target_share(members, me, total)

"""Console sessions (ADR 0022) on both adapters: kept by digest, listed while live, revoked."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import timedelta

import pytest

from workload_domain.console_sessions import ConsoleSession
from workload_domain.errors import StoreIntegrityError
from workload_domain.ports import Store
from workload_engine.clock import FakeClock

pytestmark = pytest.mark.anyio


def session(clock: FakeClock, name: str, *, seconds: int = 3600, ago: int = 0) -> ConsoleSession:
    created = clock.now() - timedelta(seconds=ago)
    return ConsoleSession(
        session_id=f"id-{name}",
        digest=hashlib.sha256(name.encode()).hexdigest(),
        principal_id="sha256:" + "a" * 32,
        created_at=created,
        expires_at=created + timedelta(seconds=seconds),
    )


async def test_a_session_is_found_by_its_digest(store: Store, clock: FakeClock) -> None:
    kept = session(clock, "one")
    await store.create_console_session(kept)
    assert await store.find_console_session(kept.digest) == kept
    assert await store.find_console_session(hashlib.sha256(b"other").hexdigest()) is None


async def test_live_sessions_are_listed_newest_first(store: Store, clock: FakeClock) -> None:
    older = session(clock, "older", ago=60)
    newer = session(clock, "newer")
    ended = session(clock, "ended", seconds=10, ago=20)
    for each in (ended, older, newer):
        await store.create_console_session(each)
    assert list(await store.list_console_sessions(clock.now())) == [newer, older]
    later = clock.now() + timedelta(seconds=3590)
    assert list(await store.list_console_sessions(later)) == [newer]


async def test_a_revoked_session_stays_revoked(store: Store, clock: FakeClock) -> None:
    kept = session(clock, "one")
    other = session(clock, "two")
    await store.create_console_session(kept)
    await store.create_console_session(other)
    assert await store.revoke_console_session(kept.session_id, clock.now()) is True
    found = await store.find_console_session(kept.digest)
    assert found is not None
    assert found.revoked_at == clock.now()
    assert not found.live(clock.now())
    assert await store.revoke_console_session(kept.session_id, clock.now()) is False
    assert await store.revoke_console_session("id-nobody", clock.now()) is False
    assert list(await store.list_console_sessions(clock.now())) == [other]


async def test_an_expired_session_cannot_be_revoked(store: Store, clock: FakeClock) -> None:
    kept = session(clock, "one", seconds=10, ago=20)
    await store.create_console_session(kept)
    assert await store.revoke_console_session(kept.session_id, clock.now()) is False
    assert await store.find_console_session(kept.digest) == kept


async def test_a_sign_in_forgets_sessions_that_ended_before_it(
    store: Store, clock: FakeClock
) -> None:
    expired = session(clock, "expired", seconds=10, ago=20)
    revoked = session(clock, "revoked", ago=30)
    live = session(clock, "live", ago=40)
    for each in (expired, revoked, live):
        await store.create_console_session(each)
    await store.revoke_console_session(revoked.session_id, clock.now() - timedelta(seconds=5))
    await store.create_console_session(session(clock, "new"))
    assert await store.find_console_session(expired.digest) is None
    assert await store.find_console_session(revoked.digest) is None
    assert await store.find_console_session(live.digest) == live


@pytest.mark.parametrize("same", ["session_id", "digest"])
async def test_a_session_id_or_digest_is_unique(store: Store, clock: FakeClock, same: str) -> None:
    first = session(clock, "one")
    await store.create_console_session(first)
    second = session(clock, "two")
    duplicate = replace(second, **{same: getattr(first, same)})
    with pytest.raises(StoreIntegrityError):
        await store.create_console_session(duplicate)
    assert list(await store.list_console_sessions(clock.now())) == [first]

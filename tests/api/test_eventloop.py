"""The service's event loop (ADR 0016): uvloop; start-up frozen; a higher young threshold."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
import uvloop

from workload_api import eventloop


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()  # the test process goes on collecting what serve froze
    gc.set_threshold(*threshold)  # and at its own thresholds


async def _loop_and_frozen() -> tuple[type[asyncio.AbstractEventLoop], int]:
    return type(asyncio.get_running_loop()), gc.get_freeze_count()


async def _threshold() -> tuple[int, int, int]:
    return gc.get_threshold()


def test_run_uses_uvloop_and_freezes_nothing(unfrozen: None) -> None:
    loop, frozen = eventloop.run(_loop_and_frozen())
    assert issubclass(loop, uvloop.Loop)
    assert frozen == 0


def test_serve_freezes_what_start_up_built(unfrozen: None) -> None:
    built_at_start_up = {"wiring": [object()]}
    tracked_before = len(gc.get_objects())
    loop, frozen = eventloop.serve(_loop_and_frozen())
    assert issubclass(loop, uvloop.Loop)
    # What was alive before the loop started is in the permanent generation (which the
    # collector, and gc.get_objects, no longer walk), this dictionary too.
    assert frozen >= tracked_before // 2
    assert not any(o is built_at_start_up for o in gc.get_objects())


def test_serve_raises_the_young_threshold_only(unfrozen: None) -> None:
    gc.set_threshold(700, 11, 12)
    assert eventloop.serve(_threshold()) == (eventloop.YOUNG_THRESHOLD, 11, 12)


def test_run_keeps_the_thresholds(unfrozen: None) -> None:
    gc.set_threshold(700, 11, 12)
    assert eventloop.run(_threshold()) == (700, 11, 12)

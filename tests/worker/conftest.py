"""Fixtures of the worker SDK's tests: the fake control plane and workers wired to it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import pytest

from tests.waiting import await_until
from tests.worker.fake_server import BASE_URL, WORKER_TOKEN, FakeControlPlane
from workload_sdk import AsyncClient
from workload_worker import Worker

T = TypeVar("T")
MakeWorker = Callable[..., Worker]


@pytest.fixture
def fake() -> FakeControlPlane:
    """A fresh fake control plane."""
    return FakeControlPlane()


@pytest.fixture
def make_worker(fake: FakeControlPlane) -> MakeWorker:
    """Workers talking to ``fake``, with short waits (any ``Worker`` argument may be given)."""

    def make(**options: Any) -> Worker:
        client = AsyncClient(
            base_url=BASE_URL, token=WORKER_TOKEN, transport=fake.transport, max_retries=0
        )
        settings: dict[str, Any] = {
            "queues": ["default"],
            "concurrency": 4,
            "worker_id": "w-test",
            "wait_seconds": 0.5,
            "grace_seconds": 5.0,
            "backoff_initial_seconds": 0.01,
            "backoff_max_seconds": 0.05,
            "client": client,
        }
        return Worker(**(settings | options))

    return make


async def eventually(
    check: Callable[[], T | None], *, within: float = 10, message: str = "condition"
) -> T:
    """``check()`` once it is truthy (polled in the event loop, with a deadline)."""

    async def probe() -> T | None:
        return check()

    return await await_until(probe, within=within, message=message)


@asynccontextmanager
async def serving(worker: Worker, *, stop_now: bool = True) -> AsyncIterator[None]:
    """Run ``worker.serve()`` for the block; then stop it and wait until it has returned."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(worker.serve)
        await eventually(lambda: worker.is_serving, message="the worker serves")
        yield
        worker.stop(now=stop_now)
        with anyio.fail_after(15):
            await eventually(lambda: not worker.is_serving, within=15, message="it stopped")

"""Which shard epoch the current task's execution writes carry (SPEC §16).

A replica executes a run only while it holds the run's shard; the run's runner sets the shard's
:class:`~workload_domain.shards.ShardFence` for its task (:func:`fenced`), and every task it
starts inherits it (its attempts, an agent's journal writes). The store reads it
(:func:`current_fence`) and puts the epoch in the same statement as the write, which the
database refuses once another replica took the shard. Writes made outside a runner — an API's
cancel, a worker's report settled by a replica that does not own the run, a claim — carry none:
they are decided on a fresh read and checked by the run's revision or the attempt's lease.

A context variable rather than a parameter: the fence belongs to the *writer* (the runner and
everything it started), not to the data it writes, and it must reach the writes of executors
that know nothing of shards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from workload_domain.shards import ShardFence

__all__ = ["current_fence", "fenced"]

_FENCE: ContextVar[ShardFence | None] = ContextVar("workload_shard_fence", default=None)


def current_fence() -> ShardFence | None:
    """The shard fence of the current task's writes, or None: not fenced by a shard."""
    return _FENCE.get()


@contextmanager
def fenced(fence: ShardFence | None) -> Iterator[None]:
    """Fence the writes of the ``with`` body (and of tasks it starts) with ``fence``."""
    token = _FENCE.set(fence)
    try:
        yield
    finally:
        _FENCE.reset(token)

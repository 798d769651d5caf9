"""The worker's settings the API constrains: queue names, worker ids, action names."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence

from workload_worker.errors import WorkerConfigError

__all__ = [
    "ACTION",
    "BUILT_IN_ACTIONS",
    "MAX_ACTIONS",
    "QUEUE",
    "WORKER_ID",
    "checked_queues",
    "default_worker_id",
    "non_negative",
]

BUILT_IN_ACTIONS = frozenset({"mock", "agent"})
"""Actions that run inside the coordinator, never on a worker."""
QUEUE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
WORKER_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
ACTION = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
"""An action name the API accepts in a claim (ADR 0023)."""
MAX_ACTIONS = 256
"""The most actions a claim may name (ADR 0023)."""


def default_worker_id() -> str:
    """``<host>-<pid>``, with characters the API does not allow replaced by ``-``."""
    raw = f"{socket.gethostname() or 'worker'}-{os.getpid()}"
    return re.sub(r"[^A-Za-z0-9._-]", "-", raw)[-128:]


def checked_queues(queues: Sequence[str]) -> list[str]:
    """The queue names, in order without repeats, if the API accepts each of them.

    Raises:
        WorkerConfigError: no queue, or a name the API would refuse.
    """
    if isinstance(queues, str) or not queues:
        raise WorkerConfigError("queues must be a non-empty list of queue names")
    for queue in queues:
        if not isinstance(queue, str) or not QUEUE.fullmatch(queue):
            raise WorkerConfigError(f"queue {queue!r} does not match {QUEUE.pattern}")
    return list(dict.fromkeys(queues))


def non_negative(name: str, value: float) -> float:
    """``value``, if it is 0 or more.

    Raises:
        WorkerConfigError: it is negative.
    """
    if value < 0:
        raise WorkerConfigError(f"{name} must be at least 0")
    return value

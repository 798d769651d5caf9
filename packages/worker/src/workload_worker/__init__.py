"""Worker SDK of the Workload control plane (SPEC §10): run remote actions under leases.

Example:
    >>> from workload_worker import Context, Worker  # doctest: +SKIP
    >>> worker = Worker(queues=["default"], concurrency=8)  # doctest: +SKIP
    >>> @worker.action("resize")  # doctest: +SKIP
    ... async def resize(ctx: Context, input: dict) -> dict:
    ...     return {"width": input["width"] // 2}
    >>> worker.run()  # doctest: +SKIP

A worker claims attempts of the actions it declares, runs their handlers (coroutine functions on
the event loop, plain functions in threads), heartbeats their leases, and reports each outcome
once. It depends on ``workload-sdk`` and ``anyio`` only, and logs to the ``workload.worker``
logger.
"""

from workload_worker._context import Context, JsonObject
from workload_worker._outcome import INVALID_OUTPUT, WORKER_SHUTDOWN
from workload_worker._settings import default_worker_id
from workload_worker._worker import Handler, Worker
from workload_worker.errors import NonRetryableError, WorkerConfigError, WorkerError

__all__ = [
    "INVALID_OUTPUT",
    "WORKER_SHUTDOWN",
    "Context",
    "Handler",
    "JsonObject",
    "NonRetryableError",
    "Worker",
    "WorkerConfigError",
    "WorkerError",
    "default_worker_id",
]

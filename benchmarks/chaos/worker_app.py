"""The soak's worker: ``workload worker benchmarks.chaos.worker_app:worker``.

Three actions of the worker SDK, each cheap, each writing down every execution of its handler
(a JSON line when it starts and one when it ends, in ``$CHAOS_EXECUTIONS_DIR/<pid>.jsonl``) so
that the soak can count handler executions per attempt id afterwards:

- ``chaos_quick`` (async): sleeps ``sleep_ms`` (default 20) and echoes the step;
- ``chaos_heartbeat`` (sync, in a thread): ``steps`` short sleeps with a heartbeat after each,
  stopping early when the worker says so (``ctx.cancelled``);
- ``chaos_tool`` (async): an agent's tool; answers the length of the ``text`` it is given.

An execution is one call of a handler; a line is written before the handler's work and one after
it (with ``"end"``), so that an execution cut short by a SIGKILL still shows its start.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from workload_worker import Context, Worker

__all__ = ["EXECUTIONS_ENV", "QUEUE", "read_executions", "worker"]

EXECUTIONS_ENV = "CHAOS_EXECUTIONS_DIR"
QUEUE = "chaos"

# Short waits and backoffs: a replica the worker talks to may be killed and back in seconds.
worker = Worker(
    queues=[QUEUE], concurrency=8, grace_seconds=5, wait_seconds=5, backoff_max_seconds=2
)

_lock = threading.Lock()


def _record(ctx: Context, phase: str) -> None:
    directory = os.environ.get(EXECUTIONS_ENV)
    if not directory:
        return
    line = {
        "phase": phase,
        "attempt_id": ctx.attempt_id,
        "run_id": ctx.run_id,
        "task_key": ctx.task_key,
        "attempt": ctx.attempt,
        "action": ctx.action,
        "kind": ctx.kind,
        "pid": os.getpid(),
        "at": time.time(),
    }
    with _lock, (Path(directory) / f"{os.getpid()}.jsonl").open("a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
        out.flush()


@worker.action("chaos_quick")
async def chaos_quick(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """Sleep ``sleep_ms`` milliseconds; echo the task."""
    _record(ctx, "start")
    await anyio.sleep(float(input.get("sleep_ms", 20)) / 1000)
    _record(ctx, "end")
    return {"task": ctx.task_key, "attempt": ctx.attempt}


@worker.action("chaos_heartbeat")
def chaos_heartbeat(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``steps`` sleeps of ``step_ms`` milliseconds, a heartbeat after each."""
    _record(ctx, "start")
    steps = int(input.get("steps", 10))
    done = 0
    for done in range(1, steps + 1):
        if ctx.cancelled.is_set():
            break
        time.sleep(float(input.get("step_ms", 100)) / 1000)
        ctx.heartbeat({"done": done, "of": steps})
    _record(ctx, "end")
    return {"steps": done}


@worker.action("chaos_tool")
async def chaos_tool(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """An agent's tool: the length of ``text``."""
    _record(ctx, "start")
    await anyio.sleep(0.02)
    _record(ctx, "end")
    return {"length": len(str(input.get("text", "")))}


def read_executions(directory: Path) -> list[dict[str, Any]]:
    """Every line every worker process wrote (a line cut by a SIGKILL is left out)."""
    lines: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(text)
            except ValueError:
                continue
            if isinstance(record, dict):
                lines.append(record)
    return lines

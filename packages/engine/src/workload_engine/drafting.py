"""Generating drafts (SPEC §11): model answers compiled, re-prompted with their problems.

:class:`DraftWriter` runs in the coordinator, in a task group of its own (like the engine's):
a draft created by ``POST /drafts`` is handed to it after its transaction committed, and at
start-up it takes every draft a stopped coordinator left ``generating`` (the generation starts
over: a draft's model calls are not journaled — only its end is written, once). A generation
gives the model the definition's schema and the known actions — the built-ins and those named
by the claims of workers seen in the last 24 hours, as a bounded list of names in a data block
(ADR 0023) — reads each answer with the same compiler as ``POST /workflows``, and tells the
model every problem, up to :data:`MAX_ANSWERS` answers. It ends ``ready`` (a normalized
definition and its hash) or ``invalid``; nothing becomes a version here.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus

from workload_domain.agent.llm import (
    MODEL_ERROR,
    Message,
    ModelFailure,
    ModelRequest,
    Models,
    Role,
    provider_model,
    provider_of,
)
from workload_domain.drafts import (
    MAX_ANSWERS,
    DraftRecord,
    DraftStatus,
    draft_messages,
    read_answer,
    retry_message,
)
from workload_domain.jsonvalues import JsonObject, storable
from workload_domain.ports import Clock, DraftStore, WorkerStore
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_domain.usage import Usage

__all__ = ["BUILT_IN_ACTIONS", "DraftWriter", "DraftWriterStore"]

_log = logging.getLogger("workload.drafts")

BUILT_IN_ACTIONS = frozenset({"mock", "agent"})
RECENT_WORKERS = timedelta(hours=24)
_CONCURRENT = 4


class DraftWriterStore(DraftStore, WorkerStore, Protocol):
    """What generating drafts needs from the store: drafts, and the workers seen."""


class DraftWriter:
    """Generates drafts in the background (see the module's docstring)."""

    def __init__(
        self,
        store: DraftWriterStore,
        models: Models,
        clock: Clock,
        telemetry: Telemetry = NO_TELEMETRY,
        endpoints: Collection[str] | None = None,
    ) -> None:
        self._store = store
        self._models = models
        self._endpoints = endpoints
        self._clock = clock
        self._telemetry = telemetry
        self._group: TaskGroup | None = None
        self._active: set[str] = set()
        self._limiter = anyio.CapacityLimiter(_CONCURRENT)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Generate what is submitted until cancelled."""
        async with anyio.create_task_group() as group:
            self._group = group
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._group = None

    def submit(self, draft_id: str) -> None:
        """Generate ``draft_id`` (no-op if it is being generated, or if not running)."""
        if self._group is None or draft_id in self._active:
            return
        self._active.add(draft_id)
        self._group.start_soon(self._generate_guarded, draft_id, name=f"draft {draft_id}")

    async def recover(self) -> int:
        """Generate again every draft left ``generating``; how many."""
        left = await self._store.generating_drafts()
        for draft_id in left:
            self.submit(draft_id)
        return len(left)

    async def _generate_guarded(self, draft_id: str, **_: Any) -> None:
        try:
            async with self._limiter:
                await self.generate(draft_id)
        except Exception:  # a store fault: the draft stays generating; the next start retries
            _log.exception("the generation of draft %s failed", draft_id)
        finally:
            self._active.discard(draft_id)

    async def generate(self, draft_id: str) -> DraftRecord | None:
        """Generate one draft to its end; the draft as written (None: not generating)."""
        draft = await self._store.find_draft(draft_id)
        if draft is None or draft.status is not DraftStatus.GENERATING:
            return None
        wanted = draft.requested_workflow_id
        messages = draft_messages(draft.prompt, await self._actions(), wanted)
        problems: list[JsonObject] = []
        usage = Usage()
        try:
            model = self._models.model(draft.model, script=draft.script)
        except ModelFailure as exc:
            return await self._end(draft, None, [_failure(exc, 1)], usage)
        named = provider_model(draft.model)
        provider = provider_of(draft.model)
        for answer in range(1, MAX_ANSWERS + 1):
            # Counted as every model call is (SPEC §12: workload_model_calls_total, tokens).
            with self._telemetry.model_call(provider=provider, model=named) as call:
                try:
                    response = await model.complete(ModelRequest(named, tuple(messages)))
                except ModelFailure as exc:
                    call.outcome(exc.code)
                    problems.append(_failure(exc, answer))
                    break
                except Exception as exc:  # an adapter's bug ends the draft, not the service
                    call.outcome(MODEL_ERROR)
                    bug = ModelFailure(f"the model adapter failed: {type(exc).__name__}")
                    problems.append(_failure(bug, answer))
                    break
                tokens = response.usage
                call.usage(input_tokens=tokens.input_tokens, output_tokens=tokens.output_tokens)
            usage = usage + Usage(
                model_calls=1,
                input_tokens=max(response.usage.input_tokens, 0),
                output_tokens=max(response.usage.output_tokens, 0),
            )
            content = storable(response.content) if isinstance(response.content, str) else None
            reading = read_answer(content, answer, wanted, self._endpoints)
            problems.extend(reading.problems)
            if reading.compiled is not None:
                return await self._end(draft, reading.compiled, problems, usage)
            messages.append(Message(Role.ASSISTANT, content))
            messages.append(retry_message(reading.problems))
        return await self._end(draft, None, problems, usage)

    async def _end(
        self, draft: DraftRecord, compiled: Any, problems: Sequence[JsonObject], usage: Usage
    ) -> DraftRecord | None:
        ended = replace(
            draft,
            status=DraftStatus.INVALID if compiled is None else DraftStatus.READY,
            workflow_id=draft.workflow_id if compiled is None else compiled.workflow_id,
            definition=None if compiled is None else compiled.document(),
            definition_hash=None if compiled is None else compiled.definition_hash,
            problems=tuple(storable(p) for p in problems),
            usage=usage,
            updated_at=self._clock.now(),
        )
        return ended if await self._store.finish_draft(ended) else None

    async def _actions(self) -> list[str]:
        """The built-in actions, then those of workers seen in the last 24 hours.

        The workers' actions come most declared first (then by name): when there are more
        than a prompt lists (``known_actions``), those most workers serve are kept.
        """
        since = self._clock.now() - RECENT_WORKERS
        served: Counter[str] = Counter()
        cursor: str | None = None
        for _ in range(100):  # bounded: at most 20,000 workers are looked at
            page = await self._store.page_workers(cursor, 200)
            served.update(a for w in page.items if w.last_seen_at >= since for a in w.actions)
            cursor = page.next_cursor
            if cursor is None:
                break
        ranked = sorted(served, key=lambda a: (-served[a], a))
        return [*sorted(BUILT_IN_ACTIONS), *ranked]


def _failure(exc: ModelFailure, answer: int) -> JsonObject:
    return {"answer": answer, "path": "", "message": f"{exc.code}: {exc.message}"}

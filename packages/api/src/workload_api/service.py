"""Application services behind the HTTP handlers: each returns the outcome to send.

Every write is idempotent (the outcome is saved with the write) and hands work to the engine
only after its transaction committed. A replayed request raises
:class:`~workload_domain.idempotency.Replay` with the stored outcome.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from workload_api import schemas
from workload_domain.compiler import compile_definition
from workload_domain.cursors import Page
from workload_domain.errors import InvalidArgument, Problem, VersionNotFound
from workload_domain.idempotency import IdempotencyClaim, IdempotentWrite, Outcome, Replay
from workload_domain.ids import uuid7
from workload_domain.jsonvalues import json_problems
from workload_domain.model import RunRecord, RunSnapshot, VersionRecord, WorkflowRecord
from workload_domain.ports import Clock, Store
from workload_domain.statuses import RunStatus
from workload_engine.engine import Engine
from workload_engine.runs import build_run, request_cancel

__all__ = ["ControlPlane"]


def _json(model: Any) -> dict[str, Any]:
    body: dict[str, Any] = model.model_dump(mode="json")
    return body


class ControlPlane:
    """Workflows, versions and runs: the use cases of the API."""

    def __init__(
        self,
        store: Store,
        engine: Engine,
        clock: Clock,
        new_run_id: Callable[[], str] | None = None,
    ) -> None:
        self.store = store
        self.engine = engine
        self.clock = clock
        self._new_run_id = new_run_id or self._uuid7

    async def _replay_if_seen(self, claim: IdempotencyClaim) -> None:
        """Answer a retried request from its stored outcome before doing any work.

        Cancel checks first, so a retry replays even when its preconditions no longer hold (a
        cancel retried with an ETag its own first attempt made stale). Creations need no extra
        round trip: their store transaction looks the key up before writing and replays.
        """
        outcome = await self.store.find_outcome(claim)
        if outcome is not None:
            raise Replay(outcome)

    def _uuid7(self) -> str:
        return uuid7(int(self.clock.now().timestamp() * 1000), secrets.token_bytes(10))

    # -- writes ------------------------------------------------------------------------------

    async def create_workflow(self, body: dict[str, Any], claim: IdempotencyClaim) -> Outcome:
        """Compile the definition and create the workflow with it as version 1."""
        compiled = compile_definition(body)
        now = self.clock.now()
        version = VersionRecord(
            compiled.workflow_id,
            1,
            compiled.definition_hash,
            len(compiled.tasks),
            now,
            compiled.document(),
        )
        workflow = WorkflowRecord(
            compiled.workflow_id, 1, compiled.definition.description, now, now
        )
        created = await self.store.create_workflow(
            workflow, version, IdempotentWrite(claim, _version_outcome)
        )
        self.engine.definitions.put(created.version, compiled)
        return _version_outcome(created)

    async def create_version(
        self, workflow_id: str, body: dict[str, Any], claim: IdempotencyClaim
    ) -> Outcome:
        """Compile the definition and add it as the workflow's next version."""
        await self.store.get_workflow(workflow_id)  # 404 before 400: the path is checked first
        compiled = compile_definition(body, workflow_id=workflow_id)
        created = await self.store.create_version(
            workflow_id=workflow_id,
            definition_hash=compiled.definition_hash,
            definition=compiled.document(),
            task_count=len(compiled.tasks),
            created_at=self.clock.now(),
            idempotency=IdempotentWrite(claim, _version_outcome),
        )
        self.engine.definitions.put(created.version, compiled)
        return _version_outcome(created)

    async def start_run(
        self,
        workflow_id: str,
        version: int,
        body: dict[str, Any] | None,
        claim: IdempotencyClaim,
    ) -> Outcome:
        """Create a run in one transaction, then hand it to the engine."""
        request = _start_request(body)
        compiled = await self.engine.definitions.get(workflow_id, version)
        new_run = build_run(
            compiled,
            version=version,
            run_id=self._new_run_id(),
            run_input=request.input,
            clock=self.clock,
        )
        counts = Counter(t.status.value for t in new_run.tasks)

        def render(run: RunRecord) -> Outcome:
            return Outcome(202, _json(schemas.run_out(run, counts)))

        run = await self.store.create_run(new_run, IdempotentWrite(claim, render))
        # Only now, after COMMIT, does execution start; a crash before this line is repaired
        # by the recovery scan at the next start-up.
        self.engine.submit(run.run_id)
        return render(run)

    async def cancel_run(
        self, run_id: str, if_revision: int | None, claim: IdempotencyClaim
    ) -> Outcome:
        """Record a cancel request; 200 if the run was already canceled, else 202."""
        await self._replay_if_seen(claim)

        def render(after: RunSnapshot, already_canceled: bool) -> Outcome:
            counts = Counter(t.status.value for t in after.tasks)
            return Outcome(
                200 if already_canceled else 202, _json(schemas.run_out(after.run, counts))
            )

        result = await request_cancel(
            self.store,
            self.clock,
            run_id,
            if_revision=if_revision,
            claim=claim,
            render=render,
        )
        self.engine.notify(run_id)
        return render(result.snapshot, result.already_canceled)

    # -- reads -------------------------------------------------------------------------------

    async def list_workflows(self, cursor: str | None, limit: int) -> dict[str, Any]:
        """A page of workflows."""
        page = await self.store.page_workflows(cursor, limit)
        return _page(page, schemas.workflow_out)

    async def get_workflow(self, workflow_id: str) -> dict[str, Any]:
        """One workflow."""
        return _json(schemas.workflow_out(await self.store.get_workflow(workflow_id)))

    async def list_versions(
        self, workflow_id: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        """A page of a workflow's version summaries."""
        page = await self.store.page_versions(workflow_id, cursor, limit)
        return _page(page, schemas.version_summary_out)

    async def get_version(self, workflow_id: str, version: int | str) -> dict[str, Any]:
        """One version with its definition (a non-numeric version names no version)."""
        if isinstance(version, str):
            await self.store.get_workflow(workflow_id)
            raise VersionNotFound(workflow_id, version)
        return _json(schemas.version_out(await self.store.get_version(workflow_id, version)))

    async def list_runs(
        self,
        workflow_id: str | None,
        status: RunStatus | None,
        cursor: str | None,
        limit: int,
    ) -> dict[str, Any]:
        """A page of runs, optionally filtered."""
        page = await self.store.page_runs(workflow_id, status, cursor, limit)
        counts = await self.store.task_counts([r.run_id for r in page.items])
        return {
            "items": [_json(schemas.run_out(r, counts.get(r.run_id, {}))) for r in page.items],
            "next_cursor": page.next_cursor,
        }

    async def get_run(self, run_id: str) -> tuple[dict[str, Any], int]:
        """One run, and its revision (for the ETag)."""
        run, counts = await self.store.get_run_with_counts(run_id)
        return _json(schemas.run_out(run, counts)), run.revision

    async def list_tasks(self, run_id: str, cursor: str | None, limit: int) -> dict[str, Any]:
        """A page of a run's tasks."""
        return _page(await self.store.page_tasks(run_id, cursor, limit), schemas.task_out)

    async def get_task(self, run_id: str, task_key: str) -> dict[str, Any]:
        """One task of a run."""
        return _json(schemas.task_out(await self.store.get_task(run_id, task_key)))

    async def list_attempts(
        self, run_id: str, task_key: str, cursor: str | None, limit: int
    ) -> dict[str, Any]:
        """A page of a task's attempts."""
        page = await self.store.page_attempts(run_id, task_key, cursor, limit)
        return _page(page, schemas.attempt_out)

    async def list_events(self, run_id: str, cursor: str | None, limit: int) -> dict[str, Any]:
        """A page of a run's events."""
        return _page(await self.store.page_events(run_id, cursor, limit), schemas.event_out)


def _version_outcome(version: VersionRecord) -> Outcome:
    return Outcome(201, _json(schemas.version_out(version)))


def _page(page: Page[Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    return {"items": [_json(convert(item)) for item in page.items], "next_cursor": page.next_cursor}


def _start_request(body: dict[str, Any] | None) -> schemas.StartRunRequest:
    try:
        request = schemas.StartRunRequest.model_validate(body or {})
    except ValidationError as exc:
        problems = tuple(
            Problem(
                "".join(f"/{p}" for p in e["loc"]),
                "unknown field" if e["type"] == "extra_forbidden" else e["msg"],
            )
            for e in exc.errors(include_url=False, include_input=False)
        )
        raise InvalidArgument("the request body is invalid", problems) from None
    problems = tuple(json_problems(request.input, ("input",)))
    if problems:
        raise InvalidArgument("the run input cannot be stored", problems)
    return request

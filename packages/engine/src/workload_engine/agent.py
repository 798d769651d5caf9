"""The ``agent`` action (SPEC §11): a model-and-tools loop whose every step is durable.

:class:`AgentExecutor` executes agent attempts in the coordinator. It is a thin imperative shell
around :func:`~workload_domain.agent.loop.decide`: read the attempt's journal, ask what to do,
do it — commit a step, call the model or run the tools, commit the step's end — and read again.
A step is committed before the call it records is made and its end before the loop moves on, so
the journal always says how far the attempt got. An attempt that a restart stopped is *resumed*
by the next coordinator (the runner launches it again with the same number): the same loop
replays the journal and carries on. Budgets, tool whitelists and argument validation are
decided in the functional core; this shell only enforces them.

Tool calls whose action is ``mock`` run here with the arguments as input; any other action is
remote — the step is queued and a worker declaring the action claims it (``kind: tool_call``),
under the same lease, heartbeat and fencing as a task attempt. The loop waits for the step to
end (a worker's report, or the lease reaper), woken by :class:`StepSignal`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

import anyio

from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.agent.llm import MODEL_ERROR, Model, ModelFailure, Models, provider_of
from workload_domain.agent.loop import (
    CallModel,
    CallTools,
    Fail,
    Finish,
    PendingTool,
    decide,
    final_output,
    out_of_time,
    sanitized,
    tool_error,
    tool_failed,
    tool_output,
)
from workload_domain.agent.spec import AGENT_ACTION, AgentSpec, parse_agent
from workload_domain.agent.template import TEMPLATE_ERROR, TemplateError, render_prompt
from workload_domain.approvals import (
    ApprovalRecord,
    ApprovalStatus,
    approval_id,
    arguments_digest,
)
from workload_domain.jsonvalues import canonical_json, sha256_tag
from workload_domain.ports import ApprovalStore, Clock, Executor, JournalStore
from workload_domain.records import (
    ExecutorFailure,
    ExecutorRequest,
    ExecutorResult,
    ExecutorSuccess,
    ExecutorSuspended,
    TaskError,
)
from workload_domain.telemetry import NO_TELEMETRY, Telemetry
from workload_engine.mock_executor import MOCK_ACTION
from workload_engine.signals import StepKey, StepSignal, WorkSignal

__all__ = ["ATTEMPT_ENDED", "DEFAULT_JOURNAL_POLL_SECONDS", "AgentExecutor"]

ATTEMPT_ENDED = "attempt_ended"
DEFAULT_JOURNAL_POLL_SECONDS = 2.0
"""How often a loop waiting on remote tool calls re-reads its journal without a wake-up (ends
written by another process; a wake-up in this one is immediate)."""
_GONE = ExecutorFailure(
    TaskError(ATTEMPT_ENDED, "the attempt ended while its agent loop was running", False)
)


class AgentExecutor:
    """Executes attempts of ``agent`` tasks (see the module's docstring)."""

    actions = frozenset({AGENT_ACTION})

    def __init__(
        self,
        journal: AgentStore,
        models: Models,
        clock: Clock,
        *,
        tools: Executor,
        work_signal: WorkSignal | None = None,
        step_signal: StepSignal | None = None,
        poll_seconds: float = DEFAULT_JOURNAL_POLL_SECONDS,
        telemetry: Telemetry = NO_TELEMETRY,
    ) -> None:
        self._journal = journal
        self._models = models
        self._clock = clock
        self._tools = tools
        """Executes in-process tools (``mock``)."""
        self.work_signal = work_signal or WorkSignal()
        self.step_signal = step_signal or StepSignal()
        self._poll = poll_seconds
        self._telemetry = telemetry
        """GenAI spans and metrics of model and tool calls (SPEC §12)."""

    async def execute(self, request: ExecutorRequest) -> ExecutorResult:
        """Run (or resume) the loop of one agent attempt until it finishes or fails."""
        try:
            spec = parse_agent(request.input)
        except ValueError as exc:
            return _failure("invalid_input", f"the agent input is invalid: {exc}", False)
        try:
            prompt = render_prompt(spec.prompt, request.run_input, request.upstream)
        except TemplateError as exc:
            return _failure(TEMPLATE_ERROR, exc.message, False)
        try:
            model = self._models.model(spec.model, script=_script(spec))
        except ModelFailure as exc:
            return _failure(exc.code, exc.message, exc.retryable)
        key: StepKey = (request.run_id, request.task_key, request.attempt)
        started = request.started_at or self._clock.now()
        while True:
            steps = await self._journal.list_steps(*key)
            move = decide(spec, prompt, steps, elapsed_seconds=self._elapsed(request, started))
            if isinstance(move, Fail):
                return ExecutorFailure(move.error)
            if isinstance(move, Finish):
                output = final_output(spec, move.content, move.usage)
                if isinstance(output, TaskError):
                    return ExecutorFailure(output)
                return ExecutorSuccess(output)
            if isinstance(move, CallModel):
                existing = next((s for s in steps if s.sequence == move.sequence), None)
                if not await self._call_model(model, key, move, existing):
                    return _GONE
                continue
            done = await self._call_tools(request, key, move, spec, started)
            if isinstance(done, ExecutorSuspended):
                return done
            if not done:
                return _GONE

    async def _call_model(
        self, model: Model, key: StepKey, move: CallModel, existing: StepRecord | None
    ) -> bool:
        step = existing
        if step is None:
            step = await self._journal.begin_step(
                StepRecord(
                    *key,
                    sequence=move.sequence,
                    kind=StepKind.MODEL_CALL,
                    status=StepStatus.RUNNING,
                    request=move.journaled,
                    request_hash=move.request_hash,
                    started_at=self._clock.now(),
                )
            )
            if step is None:
                return False
        provider = provider_of(move.journaled.get("model", "mock"))
        with self._telemetry.model_call(provider=provider, model=move.request.model) as call:
            try:
                answer = sanitized(await model.complete(move.request), move.sequence)
            except ModelFailure as exc:
                error = TaskError(exc.code, exc.message, exc.retryable)
                ended = self._ended(step, StepStatus.FAILED, {"error": error.to_json()})
                call.outcome(exc.code)
            except Exception as exc:  # an adapter's bug fails the attempt, not the service
                bug = f"the model adapter failed: {type(exc).__name__}"
                error = TaskError(MODEL_ERROR, bug, False)
                ended = self._ended(step, StepStatus.FAILED, {"error": error.to_json()})
                call.outcome(MODEL_ERROR)
            else:
                ended = replace(
                    self._ended(step, StepStatus.SUCCEEDED, answer.to_json()),
                    usage=answer.usage.to_json(),
                )
                tokens = answer.usage
                call.usage(input_tokens=tokens.input_tokens, output_tokens=tokens.output_tokens)
        return await self._journal.finish_step(ended) is not None

    def _elapsed(self, request: ExecutorRequest, started: datetime) -> float:
        """Seconds since the attempt started, for ``max_seconds``.

        Time spent waiting for approvals does not count (SPEC §11).
        """
        return (self._clock.now() - started).total_seconds() - request.paused_seconds

    async def _call_tools(
        self,
        request: ExecutorRequest,
        key: StepKey,
        move: CallTools,
        spec: AgentSpec,
        started: datetime,
    ) -> bool | ExecutorSuspended:
        """Run, answer or wait for the pending calls; suspend on approvals still undecided.

        A call whose tool requires approval runs only once a person approved exactly its
        arguments (SPEC §11); rejected or expired, the model is told so. Calls that need no
        decision proceed meanwhile, and the attempt suspends only once the remote ones have
        ended: it stays ``running`` while a worker runs one of its calls. The approvals are then
        asked by the next decision (with the time they are really asked, and the budgets
        checked again).

        ``max_seconds`` is checked again before each call not yet begun, since time passes
        while the earlier calls of the batch run: once it has passed, no new step begins; the
        calls already begun are waited for, and the next decision refuses the rest.
        """
        remote: list[int] = []
        asked: list[ApprovalRecord] = []
        # Steps are numbered as they are begun: a call that waits for its approval begins none
        # now, and the calls after it must leave no gap in the journal (it gets the next number
        # once decided).
        numbering = next((p.sequence for p in move.calls if p.step is None), 0)
        for pending in move.calls:
            late = out_of_time(spec, self._elapsed(request, started))
            if pending.step is None and late is not None:
                break  # the next decision fails the attempt budget_exceeded
            refusal = pending.refusal
            # A call begun in process before a restart asks its approval again too: rejected or
            # expired, it was begun only to be answered so (the refusal is not journaled).
            begun = pending.step is not None and pending.step.remote
            if not begun and refusal is None and _needs_approval(pending):
                verdict = await self._approval(request, key, pending)
                if verdict.wait is not None:
                    asked.append(verdict.wait)
                    continue
                if verdict.canceled:
                    return False  # canceled with its run: the attempt is ending
                refusal = verdict.refusal
            step = pending.step
            if step is None:
                numbered = replace(pending, sequence=numbering)
                numbering += 1
                step = await self._begin_tool(request, key, numbered, refusal)
            if step is None:
                return False
            if step.remote:
                remote.append(step.sequence)
                continue
            with self._telemetry.tool_call(pending.call.name, call_id=pending.call.id) as span:
                if refusal is not None:
                    ended = self._ended(step, StepStatus.FAILED, tool_error(refusal))
                else:
                    ended = await self._run_in_process(request, step, pending)
                span.finished(ended.status.value, (ended.response or {}).get("code"))
            if await self._journal.finish_step(ended) is None:
                return False
        if remote:
            # Even with approvals asked: the attempt is running while its calls run.
            await self._wait_for(key, remote)
            return True  # decide again: it asks for the approvals still undecided
        if asked and out_of_time(spec, self._elapsed(request, started)) is None:
            return ExecutorSuspended(tuple(asked))
        return True  # past max_seconds, nobody is asked to approve a call that will be refused

    async def _approval(
        self, request: ExecutorRequest, key: StepKey, pending: PendingTool
    ) -> _Verdict:
        """What a call's approval says now: wait for it, refuse the call, run it, or stop."""
        tool = pending.tool
        assert tool is not None  # only listed tools need approval
        wanted = approval_id(*key, pending.model_sequence, pending.index)
        found = await self._journal.find_approval(wanted)
        if found is None:
            now = self._clock.now()
            arguments = pending.call.arguments
            assert isinstance(arguments, dict)  # refused otherwise
            return _Verdict(
                wait=ApprovalRecord(
                    approval_id=wanted,
                    run_id=request.run_id,
                    task_key=request.task_key,
                    attempt=request.attempt,
                    tool=tool.name,
                    tool_call_id=pending.call.id,
                    arguments=arguments,
                    arguments_digest=arguments_digest(arguments),
                    status=ApprovalStatus.PENDING,
                    requested_at=now,
                    expires_at=now + timedelta(seconds=tool.approval_timeout_seconds),
                )
            )
        if found.status is ApprovalStatus.PENDING:
            return _Verdict(wait=found)
        if found.status is ApprovalStatus.APPROVED:
            return _Verdict()
        if found.status is ApprovalStatus.REJECTED:
            comment = f": {found.comment}" if found.comment else " (no comment)"
            return _Verdict(refusal=f"rejected by {found.decided_by or 'an operator'}{comment}")
        if found.status is ApprovalStatus.EXPIRED:
            when = found.expires_at.isoformat()
            return _Verdict(refusal=f"expired: nobody decided before {when}")
        return _Verdict(canceled=True)

    async def _begin_tool(
        self, request: ExecutorRequest, key: StepKey, pending: PendingTool, refusal: str | None
    ) -> StepRecord | None:
        tool = pending.tool
        journaled = pending.request()
        now = self._clock.now()
        step = StepRecord(
            *key,
            sequence=pending.sequence,
            kind=StepKind.TOOL_CALL,
            status=StepStatus.RUNNING,
            request=journaled,
            request_hash=sha256_tag(canonical_json(journaled)),
            started_at=now,
            tool_call_id=pending.call.id,
        )
        if refusal is None and tool is not None and tool.action != MOCK_ACTION:
            wait = request.schedule_to_start_timeout_seconds
            step = replace(
                step,
                action=tool.action,
                queue=request.queue,
                heartbeat_timeout_seconds=request.heartbeat_timeout_seconds,
                deadline=request.deadline or now + timedelta(days=1),
                schedule_deadline=None if wait is None else now + timedelta(seconds=wait),
            )
        begun = await self._journal.begin_step(step)
        if begun is not None and begun.queue is not None and begun.action is not None:
            self.work_signal.notify([(begun.queue, begun.action)])
        return begun

    async def _run_in_process(
        self, request: ExecutorRequest, step: StepRecord, pending: PendingTool
    ) -> StepRecord:
        assert pending.tool is not None  # a refused call never runs
        arguments = pending.call.arguments if isinstance(pending.call.arguments, dict) else {}
        try:
            result = await self._tools.execute(
                ExecutorRequest(
                    run_id=request.run_id,
                    task_key=request.task_key,
                    attempt=request.attempt,
                    action=pending.tool.action,
                    input=arguments,
                    run_input=request.run_input,
                )
            )
        except Exception as exc:  # a tool's crash is the model's to hear about
            return self._ended(step, StepStatus.FAILED, tool_error(type(exc).__name__))
        if isinstance(result, ExecutorSuccess):
            return self._ended(step, StepStatus.SUCCEEDED, tool_output(result.output))
        if not isinstance(result, ExecutorFailure):  # pragma: no cover - mock never suspends
            return self._ended(step, StepStatus.FAILED, tool_error("the tool cannot pause"))
        return self._ended(step, StepStatus.FAILED, tool_failed(result.error))

    async def _wait_for(self, key: StepKey, sequences: list[int]) -> None:
        """Wait until every remote tool call of ``sequences`` has ended."""
        wanted = set(sequences)
        while True:
            waiter = self.step_signal.waiter(key)
            steps = await self._journal.list_steps(*key)
            if all(s.status is not StepStatus.RUNNING for s in steps if s.sequence in wanted):
                return
            with anyio.move_on_after(self._poll):
                await waiter.wait()

    def _ended(
        self, step: StepRecord, status: StepStatus, response: dict[str, object]
    ) -> StepRecord:
        return replace(step, status=status, response=response, finished_at=self._clock.now())


def _failure(code: str, message: str, retryable: bool) -> ExecutorFailure:
    return ExecutorFailure(TaskError(code, message, retryable))


def _script(spec: AgentSpec) -> list[dict[str, object]] | None:
    if spec.script is None:
        return None
    return [turn.model_dump(mode="json", exclude_none=True) for turn in spec.script]


def _needs_approval(pending: PendingTool) -> bool:
    return pending.tool is not None and pending.tool.requires_approval


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What an approval says of its call: wait for it, refuse it, run it (all None), or stop."""

    wait: ApprovalRecord | None = None
    refusal: str | None = None
    canceled: bool = False


class AgentStore(JournalStore, ApprovalStore, Protocol):
    """What the agent runtime needs from the store: its journal and its approvals."""

"""The functional core of the agent loop: from the journal, the next move (SPEC §11).

:func:`decide` is pure. It rebuilds the conversation from an attempt's journal — the system
message (the instructions), the user message (the rendered prompt), then each completed model
call's answer and the tool messages answering its calls — and says what to do next: call the
model (a new step, or again the one that was in flight at a crash), run tool calls (new steps,
or wait for the running ones), finish, or fail. Budgets are checked here, before a step is
created, so a refused call is never made. Replaying a journal therefore never repeats a
completed model call nor re-executes a completed tool call: they are read, not redone.

The conversation is always rebuilt from the journal *as stored* (the runtime uses the steps the
store returns), so a replay computes exactly the requests the first execution made, and each
model step's ``request_hash`` proves it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from workload_domain.agent.journal import StepKind, StepRecord, StepStatus
from workload_domain.agent.llm import Message, ModelRequest, ModelResponse, Role, ToolCall
from workload_domain.agent.llm import ToolSchema as ModelTool
from workload_domain.agent.output import INVALID_MODEL_OUTPUT, final_output
from workload_domain.agent.spec import AgentSpec, ToolSpec
from workload_domain.agent.validation import SchemaError, compile_schema
from workload_domain.errors import quoted
from workload_domain.jsonvalues import JsonObject, canonical_json, sha256_tag, storable
from workload_domain.records import TaskError
from workload_domain.usage import Usage

__all__ = [
    "BUDGET_EXCEEDED",
    "INVALID_MODEL_OUTPUT",
    "JOURNAL_MISMATCH",
    "CallModel",
    "CallTools",
    "Fail",
    "Finish",
    "Move",
    "PendingTool",
    "decide",
    "final_output",
    "journal_usage",
    "out_of_time",
    "sanitized",
    "tool_error",
    "tool_failed",
    "tool_output",
]

BUDGET_EXCEEDED = "budget_exceeded"
JOURNAL_MISMATCH = "journal_mismatch"
_MAX_TOOL_CALL_ID = 128
_TOOL_CALL_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@dataclass(frozen=True, slots=True)
class CallModel:
    """Call the model: a new step at ``sequence``, or ``again`` the step in flight at a crash."""

    sequence: int
    request: ModelRequest
    journaled: JsonObject
    """The step's ``request``: the messages added since the previous model call."""
    request_hash: str
    again: bool


@dataclass(frozen=True, slots=True)
class PendingTool:
    """A tool call of the model's last answer that has no result yet.

    ``step`` is its running step if it has one (wait for it, or run it again when it is
    in-process); otherwise a step is created at ``sequence`` — answered with ``refusal`` at
    once when the call is refused (unknown tool, invalid arguments), never reaching a worker.
    """

    model_sequence: int
    index: int
    call: ToolCall
    tool: ToolSpec | None
    step: StepRecord | None
    sequence: int
    refusal: str | None

    def request(self) -> JsonObject:
        """The request of this call's step."""
        return {
            "tool": self.call.name,
            "action": None if self.tool is None else self.tool.action,
            "arguments": self.call.arguments,
            "model_step": self.model_sequence,
            "index": self.index,
        }


@dataclass(frozen=True, slots=True)
class CallTools:
    """Run (or wait for) the tool calls still without a result, in the model's order."""

    calls: tuple[PendingTool, ...]


@dataclass(frozen=True, slots=True)
class Finish:
    """The model answered without tool calls: the attempt's output is made from ``content``."""

    content: str | None
    usage: Usage


@dataclass(frozen=True, slots=True)
class Fail:
    """The attempt fails with ``error`` (a budget refusal, a failed model call, a bad journal)."""

    error: TaskError


Move = CallModel | CallTools | Finish | Fail


def journal_usage(steps: Sequence[StepRecord]) -> Usage:
    """What the steps used, counting every step made (running ones too) for the budgets."""
    usage = Usage()
    for step in steps:
        if step.kind is StepKind.TOOL_CALL:
            usage = usage + Usage(tool_calls=1)
            continue
        tokens = step.usage or {}
        usage = usage + Usage(
            model_calls=1,
            input_tokens=int(tokens.get("input_tokens", 0)),
            output_tokens=int(tokens.get("output_tokens", 0)),
        )
    return usage


def decide(
    spec: AgentSpec, prompt: str, steps: Sequence[StepRecord], *, elapsed_seconds: float
) -> Move:
    """The next move of an attempt whose journal is ``steps`` (in sequence order).

    Args:
        spec: the agent task's input.
        prompt: the rendered prompt (the user message).
        steps: the attempt's journal as stored.
        elapsed_seconds: time since the attempt started, for ``max_seconds``.
    """
    messages: list[Message] = []
    if spec.instructions:
        messages.append(Message(Role.SYSTEM, spec.instructions))
    messages.append(Message(Role.USER, prompt))
    tools = tuple(ModelTool(t.name, t.description, t.parameters) for t in spec.tools)
    sent = 0  # messages the previous model calls already carried
    usage = journal_usage(steps)
    results: dict[tuple[int, int], StepRecord] = {}
    for step in steps:
        if step.kind is StepKind.TOOL_CALL:
            where = (int(step.request.get("model_step", -1)), int(step.request.get("index", -1)))
            results[where] = step

    last_model: StepRecord | None = None
    answer: ModelResponse | None = None
    for step in steps:
        if step.kind is not StepKind.MODEL_CALL:
            continue
        if answer is not None and last_model is not None:
            tool_messages = _tool_messages(last_model.sequence, answer, results)
            if tool_messages is None:
                return _mismatch(f"model step {step.sequence} was made before its tool results")
            messages.extend(tool_messages)
        request = _journaled_request(spec, tuple(messages), tools, step.request_hash)
        if request is None:
            return _mismatch(f"model step {step.sequence} does not match this conversation")
        sent = len(messages)
        last_model, answer = step, None
        if step.status is StepStatus.RUNNING:
            return CallModel(step.sequence, request, step.request, step.request_hash, again=True)
        if step.status is StepStatus.FAILED:
            return Fail(_failure(step.response))
        answer = ModelResponse.from_json(step.response or {})
        messages.append(answer.message())

    next_sequence = max((s.sequence for s in steps), default=0) + 1
    if answer is not None and last_model is not None and answer.tool_calls:
        pending = _pending(
            spec,
            last_model.sequence,
            answer,
            results=results,
            next_sequence=next_sequence,
            usage=usage,
            elapsed_seconds=elapsed_seconds,
        )
        if isinstance(pending, Fail):
            return pending
        if pending:
            return CallTools(pending)
        tool_messages = _tool_messages(last_model.sequence, answer, results)
        assert tool_messages is not None  # every call has a finished result
        messages.extend(tool_messages)
    elif answer is not None:
        return Finish(answer.content, usage)

    budget = spec.budget
    late = out_of_time(spec, elapsed_seconds)
    if late is not None:
        return late
    if usage.model_calls >= budget.max_model_calls:
        return _refused(f"max_model_calls ({budget.max_model_calls}) reached")
    if budget.max_input_tokens is not None and usage.input_tokens >= budget.max_input_tokens:
        return _refused(f"max_input_tokens ({budget.max_input_tokens}) reached")
    if budget.max_output_tokens is not None and usage.output_tokens >= budget.max_output_tokens:
        return _refused(f"max_output_tokens ({budget.max_output_tokens}) reached")
    request = _request(spec, tuple(messages), tools)
    journaled: JsonObject = {
        "model": spec.model,
        "messages": [m.to_json() for m in messages[sent:]],
        "message_count": len(messages),
        "tools": [t.name for t in tools],
    }
    if settings := request.settings.to_json():
        journaled["settings"] = settings
    return CallModel(
        next_sequence,
        request,
        journaled,
        sha256_tag(canonical_json(request.to_json())),
        again=False,
    )


def _request(
    spec: AgentSpec, messages: tuple[Message, ...], tools: tuple[ModelTool, ...]
) -> ModelRequest:
    return ModelRequest(
        spec.provider_model, messages, tools, spec.model_settings.port(), spec.output_schema
    )


def _journaled_request(
    spec: AgentSpec,
    messages: tuple[Message, ...],
    tools: tuple[ModelTool, ...],
    request_hash: str,
) -> ModelRequest | None:
    """The request a model step journaled as ``request_hash`` made (None: not this one).

    A step journaled before requests carried the output schema (ADR 0027) hashed the request
    without it: that request is the one it made, and the one a replay makes again.
    """
    request = _request(spec, messages, tools)
    earlier = ModelRequest(spec.provider_model, messages, tools, request.settings)
    for made in (request, earlier):
        if sha256_tag(canonical_json(made.to_json())) == request_hash:
            return made
    return None


def _pending(
    spec: AgentSpec,
    model_sequence: int,
    answer: ModelResponse,
    *,
    results: Mapping[tuple[int, int], StepRecord],
    next_sequence: int,
    usage: Usage,
    elapsed_seconds: float,
) -> tuple[PendingTool, ...] | Fail:
    """The calls of ``answer`` still without a result; a new one is refused by the budgets.

    A call already begun (a running step, resumed) is never refused. A call not yet begun is
    refused once ``max_seconds`` has passed or ``max_tool_calls`` is reached: the attempt fails
    at once, or, when calls before it are pending, once they have ended (the next decision).
    """
    pending: list[PendingTool] = []
    made = usage.tool_calls
    for index, call in enumerate(answer.tool_calls):
        step = results.get((model_sequence, index))
        if step is not None and step.status is not StepStatus.RUNNING:
            continue
        tool = spec.tool(call.name)
        if step is not None:
            refusal = _refusal(tool, call)  # the same as when the step was made
            pending.append(
                PendingTool(model_sequence, index, call, tool, step, step.sequence, refusal)
            )
            continue
        refused = out_of_time(spec, elapsed_seconds)
        if refused is None and made >= spec.budget.max_tool_calls:
            refused = _refused(f"max_tool_calls ({spec.budget.max_tool_calls}) reached")
        if refused is not None:
            if pending:
                break  # run those first; the next decision refuses this one
            return refused
        made += 1
        refusal = _refusal(tool, call)
        pending.append(PendingTool(model_sequence, index, call, tool, None, next_sequence, refusal))
        next_sequence += 1
    return tuple(pending)


def out_of_time(spec: AgentSpec, elapsed_seconds: float) -> Fail | None:
    """The refusal of any new step once ``max_seconds`` has passed (None: there is time left).

    ``elapsed_seconds`` counts from the attempt's start, without the time it spent in
    ``waiting_approval``. The runtime asks again before each new step of a batch of tool calls,
    since time passes while the earlier calls of the batch run.
    """
    limit = spec.budget.max_seconds
    if elapsed_seconds >= limit:
        return _refused(f"max_seconds ({limit:g}) has passed")
    return None


def _refusal(tool: ToolSpec | None, call: ToolCall) -> str | None:
    if tool is None:
        return f"unknown tool {quoted(call.name)}: this agent may call only its listed tools"
    if not isinstance(call.arguments, dict):
        return "invalid arguments: they must be a JSON object"
    try:
        problems = compile_schema(tool.parameters).errors(call.arguments)
    except SchemaError as exc:  # pragma: no cover - checked when the version was created
        return f"the tool's parameters schema is unusable: {exc.message}"
    if problems:
        return "invalid arguments: " + "; ".join(problems)
    return None


def _tool_messages(
    model_sequence: int, answer: ModelResponse, results: Mapping[tuple[int, int], StepRecord]
) -> list[Message] | None:
    messages = []
    for index, call in enumerate(answer.tool_calls):
        step = results.get((model_sequence, index))
        if step is None or step.status is StepStatus.RUNNING:
            return None
        content = canonical_json(_tool_answer(step.response)).decode("utf-8")
        messages.append(Message(Role.TOOL, content, tool_call_id=call.id))
    return messages


def _tool_answer(response: JsonObject | None) -> Any:
    if response is not None and "output" in response:
        return response["output"]
    error = (response or {}).get("error", "the tool call failed")
    return {"error": error}


def tool_output(output: JsonObject) -> JsonObject:
    """A tool step's response for a call that succeeded."""
    return {"output": output}


def tool_error(message: str, code: str | None = None) -> JsonObject:
    """A tool step's response for a call that failed, was refused, rejected or expired."""
    return {"error": message} if code is None else {"error": message, "code": code}


def tool_failed(error: TaskError) -> JsonObject:
    """A tool step's response for a call whose tool failed with ``error``.

    The model is told ``code: message`` (``error``); the error itself is kept as given
    (``failure``), for the worker's report to be answered with what it reported.
    """
    return {**tool_error(f"{error.code}: {error.message}", error.code), "failure": error.to_json()}


def _failure(response: JsonObject | None) -> TaskError:
    error = (response or {}).get("error")
    if isinstance(error, dict):
        try:
            return TaskError.from_json(error)
        except (KeyError, TypeError, ValueError):
            pass
    return TaskError("model_error", "the model call failed", False)


def _refused(message: str) -> Fail:
    return Fail(TaskError(BUDGET_EXCEEDED, f"budget exceeded: {message}", False))


def _mismatch(message: str) -> Fail:
    return Fail(
        TaskError(JOURNAL_MISMATCH, f"the step journal cannot be replayed: {message}", False)
    )


def sanitized(response: ModelResponse, sequence: int) -> ModelResponse:
    """A model's answer made safe to journal and to send back.

    Strings JSONB cannot hold are repaired (:func:`storable`); a tool call id that is missing,
    odd or repeated within the answer is replaced by ``call_<sequence>_<index>`` (suffixed
    ``_2``, ``_3``… if a call of the answer has that id), so that each tool message answers
    exactly one call and every good id is kept (the first of a repeated one).
    """
    given = [
        c.id if isinstance(c.id, str) and _TOOL_CALL_ID.fullmatch(c.id) else ""
        for c in response.tool_calls
    ]
    seen: set[str] = set()
    calls = []
    for index, call in enumerate(response.tool_calls):
        call_id = given[index]
        if not call_id or call_id in seen:
            made, number = f"call_{sequence}_{index}", 1
            call_id = made
            while call_id in seen or call_id in given:  # nor a later call's own id
                number += 1
                call_id = f"{made}_{number}"
        seen.add(call_id)
        name = storable(call.name)[:1000] if isinstance(call.name, str) else ""
        calls.append(ToolCall(call_id, name, storable(call.arguments)))
    content = response.content
    return ModelResponse(
        storable(content) if isinstance(content, str) else None,
        tuple(calls),
        response.usage,
        storable(response.finish_reason)[:64] if isinstance(response.finish_reason, str) else "",
    )

"""Spans of model and tool calls, per the OpenTelemetry GenAI conventions (SPEC §11, §12).

The agent runtime calls these through the telemetry port
(:meth:`workload_domain.telemetry.Telemetry.model_call` and ``tool_call``); they are usable
on their own with any tracer::

    with chat_span(tracer, provider="openai", model="gpt-4o-mini") as span:
        answer = await model.complete(messages)
        record_usage(span, input_tokens=answer.input_tokens, output_tokens=answer.output_tokens)

A model call is a ``CLIENT`` span named ``{operation} {model}`` (``chat gpt-4o-mini``) with
``gen_ai.operation.name``, ``gen_ai.provider.name`` (and the older ``gen_ai.system``),
``gen_ai.request.model`` and, once known, ``gen_ai.usage.input_tokens`` and
``gen_ai.usage.output_tokens``; a failed call carries ``error.type``. A tool call is an
``INTERNAL`` span named ``execute_tool {name}`` with ``gen_ai.tool.name`` and
``gen_ai.tool.call.id``. Prompts, completions and tool arguments are never recorded: they may
hold what the operator's data holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, use_span

__all__ = ["chat_span", "failed", "record_usage", "start_tool_span", "tool_span"]


@contextmanager
def chat_span(
    tracer: Tracer,
    *,
    provider: str,
    model: str,
    operation: str = "chat",
    endpoint: str | None = None,
) -> Iterator[Span]:
    """A model call's span, current within the block (an exception marks it failed).

    ``provider`` is the provider's kind (``openai``, ``anthropic``, ``mock``), as the GenAI
    conventions name it; ``endpoint`` the configured endpoint it was called through
    (``workload.model.endpoint``: ``local`` and ``cloud`` may both be ``openai``).
    """
    attributes = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.system": provider,
        "gen_ai.request.model": model,
    }
    if endpoint is not None:
        attributes["workload.model.endpoint"] = endpoint
    with tracer.start_as_current_span(
        f"{operation} {model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def record_usage(span: Span, *, input_tokens: int | None, output_tokens: int | None) -> None:
    """The tokens a model call used, as the provider reported them."""
    if input_tokens is not None:
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
    if output_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)


def failed(span: Span, error_type: str) -> None:
    """Mark a call's span failed with ``error_type`` (an error code, or an exception's name)."""
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


@contextmanager
def tool_span(tracer: Tracer, *, name: str, call_id: str | None = None) -> Iterator[Span]:
    """A tool call's span (``execute_tool {name}``), current within the block."""
    span = start_tool_span(tracer, name=name, call_id=call_id)
    with use_span(span, end_on_exit=True):
        yield span


def start_tool_span(
    tracer: Tracer,
    *,
    name: str,
    call_id: str | None = None,
    context: Context | None = None,
    start_time: int | None = None,
) -> Span:
    """A tool call's span (``execute_tool {name}``), started and not current; the caller ends it.

    For a tool call a worker executes (its span outlives the request that claimed it):
    ``context`` holds its parent, ``start_time`` (nanoseconds since the epoch) when the call
    was made. :func:`tool_span` is this span, current within a block.
    """
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id is not None:
        attributes["gen_ai.tool.call.id"] = call_id
    return tracer.start_span(
        f"execute_tool {name}",
        context=context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=start_time,
    )

"""An agent task's output (SPEC §11): the final answer, parsed and checked when it must be JSON.

With ``output_schema`` the answer must be JSON satisfying it, whether or not the provider was
asked for that schema natively (ADR 0027): a provider's promise is not a proof.
"""

from __future__ import annotations

import re

from workload_domain.agent.spec import AgentSpec
from workload_domain.agent.validation import SchemaError, compile_schema
from workload_domain.jsonvalues import JsonObject, storable, strict_loads
from workload_domain.records import TaskError
from workload_domain.usage import Usage

__all__ = ["INVALID_MODEL_OUTPUT", "final_output"]

INVALID_MODEL_OUTPUT = "invalid_model_output"

_FENCE = re.compile(r"^```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL | re.IGNORECASE)


def final_output(spec: AgentSpec, content: str | None, usage: Usage) -> JsonObject | TaskError:
    """The task's output from the model's final answer, or why it is not acceptable.

    ``structured`` is the answer parsed as JSON (a fenced ````json`` block allowed) and
    validated against ``output_schema`` when there is one; an answer that does not satisfy it
    fails the attempt ``invalid_model_output`` (retryable: another attempt may do better).
    """
    output: JsonObject = {"content": content, "structured": None, "usage": usage.to_json()}
    if spec.output_schema is None:
        return output
    text = (content or "").strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        structured = strict_loads(text)  # no key twice, no NaN, no 1e999
    except (ValueError, RecursionError):
        return TaskError(INVALID_MODEL_OUTPUT, "the final answer is not JSON", True)
    try:
        problems = compile_schema(spec.output_schema).errors(structured)
    except SchemaError as exc:  # pragma: no cover - checked when the version was created
        return TaskError(INVALID_MODEL_OUTPUT, f"output_schema is unusable: {exc.message}", False)
    if problems:
        return TaskError(
            INVALID_MODEL_OUTPUT,
            "the final answer does not satisfy output_schema: " + "; ".join(problems),
            True,
        )
    output["structured"] = storable(structured)
    return output

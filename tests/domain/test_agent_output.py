"""The final answer of an agent as its task's output (SPEC §11): parsed strictly, then checked."""

from __future__ import annotations

import pytest

from workload_domain.agent.output import INVALID_MODEL_OUTPUT, final_output
from workload_domain.agent.spec import AgentSpec
from workload_domain.records import TaskError
from workload_domain.usage import Usage

SPEC = AgentSpec.model_validate(
    {"model": "mock", "prompt": "p", "output_schema": {"type": "object"}}
)


@pytest.mark.parametrize(
    "answer",
    [
        '{"verdict": "reject", "verdict": "approve"}',  # which one the model meant is unknown
        '{"n": NaN}',
        '{"n": 1e999}',
        "not json",
    ],
    ids=["duplicate-key", "nan", "out-of-range", "text"],
)
def test_an_answer_that_is_not_strict_json_is_invalid_model_output(answer: str) -> None:
    error = final_output(SPEC, answer, Usage())
    assert isinstance(error, TaskError)
    assert (error.code, error.retryable) == (INVALID_MODEL_OUTPUT, True)


def test_a_strict_answer_is_the_structured_output() -> None:
    output = final_output(SPEC, '```json\n{"verdict": "approve", "n": 1.5}\n```', Usage())
    assert not isinstance(output, TaskError)
    assert output["structured"] == {"verdict": "approve", "n": 1.5}

"""Error codes and categories, event type strings, and the TaskError value object."""

from __future__ import annotations

import pytest

from workload_domain import errors
from workload_domain.errors import ErrorCategory, Problem
from workload_domain.events import EventType
from workload_domain.records import TaskError


@pytest.mark.parametrize(
    ("error", "category", "code"),
    [
        (errors.InvalidDefinition("x"), ErrorCategory.INVALID_INPUT, "invalid_definition"),
        (errors.InvalidArgument("x"), ErrorCategory.INVALID_INPUT, "invalid_argument"),
        (errors.InvalidCursor("x"), ErrorCategory.INVALID_INPUT, "invalid_cursor"),
        (errors.WorkflowIdMismatch("x"), ErrorCategory.INVALID_INPUT, "workflow_id_mismatch"),
        (errors.WorkflowNotFound("wf"), ErrorCategory.NOT_FOUND, "workflow_not_found"),
        (errors.VersionNotFound("wf", 2), ErrorCategory.NOT_FOUND, "version_not_found"),
        (errors.RunNotFound("r"), ErrorCategory.NOT_FOUND, "run_not_found"),
        (errors.TaskNotFound("r", "t"), ErrorCategory.NOT_FOUND, "task_not_found"),
        (errors.WorkflowExists("wf"), ErrorCategory.CONFLICT, "workflow_exists"),
        (errors.IdempotencyKeyReused(), ErrorCategory.CONFLICT, "idempotency_key_reused"),
        (errors.RunFinished("r", "failed"), ErrorCategory.CONFLICT, "run_finished"),
        (errors.PreconditionFailed("x"), ErrorCategory.PRECONDITION_FAILED, "precondition_failed"),
        (errors.RevisionConflict("r", 3), ErrorCategory.REVISION_CONFLICT, "revision_conflict"),
        (errors.IllegalTransition("run", "a", "b"), ErrorCategory.INTERNAL, "internal"),
        (errors.StoreUnavailable("x"), ErrorCategory.UNAVAILABLE, "unavailable"),
        (errors.LockLost("x"), ErrorCategory.UNAVAILABLE, "unavailable"),
    ],
)
def test_codes_and_categories(
    error: errors.WorkloadError, category: ErrorCategory, code: str
) -> None:
    assert isinstance(error, errors.WorkloadError)
    assert error.category is category
    assert error.code == code


def test_invalid_definition_carries_problems() -> None:
    problems = (Problem("/id", "bad"), Problem("", "worse"))
    error = errors.InvalidDefinition("the workflow definition is invalid", problems)
    assert isinstance(error, errors.InvalidInput)
    assert error.problems == problems
    assert error.message == str(error) == "the workflow definition is invalid"


def test_workflow_id_mismatch_is_not_an_invalid_definition() -> None:
    assert not issubclass(errors.WorkflowIdMismatch, errors.InvalidDefinition)
    assert issubclass(errors.WorkflowIdMismatch, errors.InvalidInput)


def test_problem_is_a_value() -> None:
    assert Problem("/a", "m") == Problem("/a", "m")
    assert len({Problem("/a", "m"), Problem("/a", "m"), Problem("/a", "n")}) == 2


def test_event_type_strings() -> None:
    assert {e.value for e in EventType} == {
        "run.created",
        "run.started",
        "run.cancel_requested",
        "run.succeeded",
        "run.failed",
        "run.canceled",
        "run.recovered",
        "attempt.queued",
        "attempt.started",
        "attempt.succeeded",
        "attempt.failed",
        "attempt.timed_out",
        "attempt.canceled",
        "attempt.interrupted",
        "task.waiting_retry",
        "task.succeeded",
        "task.failed",
        "task.skipped",
        "task.canceled",
        "task.waiting_approval",
        "approval.requested",
        "approval.approved",
        "approval.rejected",
        "approval.expired",
        "approval.canceled",
    }


def test_task_error_json_round_trip() -> None:
    error = TaskError("mock_failure", "attempt 1 failed", retryable=True)
    assert error.to_json() == {
        "code": "mock_failure",
        "message": "attempt 1 failed",
        "retryable": True,
    }
    assert TaskError.from_json(error.to_json()) == error

"""Domain errors become problem documents (SPEC §6): what says "again shortly" says when."""

from __future__ import annotations

import json

from workload_api.problems import problem_for, problem_response
from workload_domain.errors import RevisionConflict, RunBusy, StoreUnavailable


def test_a_busy_run_is_503_unavailable_with_retry_after() -> None:
    problem = problem_for(RunBusy("run-1"))
    assert (problem.status, problem.code) == (503, "unavailable")
    response = problem_response(problem, "req-1")
    assert response.headers["Retry-After"] == "1"
    body = json.loads(bytes(response.body))
    assert (body["status"], body["code"]) == (503, "unavailable")
    assert "run-1" not in body["detail"]  # no internals in a 5xx


def test_errors_that_do_not_say_when_carry_no_retry_after() -> None:
    for error in (StoreUnavailable("down"), RevisionConflict("run-1", 3)):
        assert "Retry-After" not in problem_response(problem_for(error), "req-1").headers

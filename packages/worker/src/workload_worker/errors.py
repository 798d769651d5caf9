"""Errors of the worker SDK: what a handler raises on purpose, and what stops a worker starting.

Hierarchy::

    WorkerError                base of this package's errors
    ├── NonRetryableError      raised by a handler: fail the attempt and do not retry the task
    │   └── InvalidInput       a typed handler's input does not validate (``invalid_input``)
    ├── WorkerConfigError      the worker cannot start (also a ValueError): no token, no action,
    │   │                      a queue, action or worker id the API would refuse
    │   └── WorkflowApplyError ``apply_on_start``: the server refused a definition (workflow_id)
    └── DefinitionError        a workflow being built is wrong (also a ValueError): a duplicate
                               task key, a handler no worker declares, a dependency elsewhere

Any other exception a handler raises fails its attempt as *retryable*, with the exception's
class name as the error code: the task's retry rule (SPEC §4) decides whether it runs again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "INVALID_INPUT",
    "DefinitionError",
    "InvalidInput",
    "NonRetryableError",
    "WorkerConfigError",
    "WorkerError",
    "WorkflowApplyError",
]

INVALID_INPUT = "invalid_input"
"""The code of an attempt whose input does not validate into its handler's model."""


class WorkerError(Exception):
    """Base of the worker SDK's errors."""


class NonRetryableError(WorkerError):
    """Raise it from a handler when another attempt cannot succeed (bad input, a refusal).

    The attempt fails with ``retryable: false``, so the task fails at once whatever its retry
    rule. Subclass it to name the error: the code reported is the class name, unless ``code``
    is given.

    Attributes:
        message: What went wrong, for people (the error's ``message``).
        code: The error ``code`` to report instead of the class name, or None.

    Example:
        >>> raise NonRetryableError("no such document", code="document_not_found")  # doctest: +SKIP
    """

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class WorkerConfigError(WorkerError, ValueError):
    """The worker cannot start as configured; the message says what to change."""


class InvalidInput(NonRetryableError):
    """A typed handler's input does not validate into its model: fail ``invalid_input``.

    Attributes:
        errors: pydantic's errors (``loc``, ``msg``, ``type``), without the input values.
    """

    def __init__(self, message: str, errors: Sequence[dict[str, Any]] = ()) -> None:
        super().__init__(message, code=INVALID_INPUT)
        self.errors = list(errors)


class WorkflowApplyError(WorkerConfigError):
    """``apply_on_start``: the server refused a workflow's definition (or the token).

    Attributes:
        workflow_id: The workflow that was not applied.
        cause: The SDK's error (``status``, ``code``, ``errors`` with every problem).
    """

    def __init__(self, workflow_id: str, cause: Exception) -> None:
        super().__init__(f"workflow {workflow_id!r} not applied: {cause}")
        self.workflow_id = workflow_id
        self.cause = cause


class DefinitionError(WorkerError, ValueError):
    """A workflow being built cannot become a definition; the message says what to change.

    Attributes:
        workflow_id: The workflow being built.
    """

    def __init__(self, message: str, *, workflow_id: str | None = None) -> None:
        super().__init__(message)
        self.workflow_id = workflow_id

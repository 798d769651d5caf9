"""Errors of the worker SDK: what a handler raises on purpose, and what stops a worker starting.

Hierarchy::

    WorkerError                base of this package's errors
    ├── NonRetryableError      raised by a handler: fail the attempt and do not retry the task
    └── WorkerConfigError      the worker cannot start (also a ValueError): no token, no action,
                               a queue, action or worker id the API would refuse

Any other exception a handler raises fails its attempt as *retryable*, with the exception's
class name as the error code: the task's retry rule (SPEC §4) decides whether it runs again.
"""

from __future__ import annotations

__all__ = ["NonRetryableError", "WorkerConfigError", "WorkerError"]


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

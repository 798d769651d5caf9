"""What a use case answers: a status, a JSON body, and whether it is a replay."""

from __future__ import annotations

from dataclasses import dataclass

from workload_domain.idempotency import Outcome, Replayed
from workload_domain.jsonvalues import JsonObject

__all__ = ["Result"]


@dataclass(frozen=True, slots=True)
class Result:
    """The answer of a use case; ``replayed`` when an idempotency key repeated a request."""

    status_code: int
    body: JsonObject
    replayed: bool = False

    @classmethod
    def of(cls, outcome: Outcome, *, replayed: bool = False) -> Result:
        """The result of an outcome (the one just written, or one replayed)."""
        return cls(outcome.status_code, outcome.body, replayed)

    @classmethod
    def replay(cls, replayed: Replayed) -> Result:
        """The result of a replayed request: its first outcome again."""
        return cls.of(replayed.outcome, replayed=True)

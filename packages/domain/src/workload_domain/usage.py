"""What agent steps consumed (SPEC §11): below both the step journal and the run records.

A run's and a task's usage (:mod:`workload_domain.records`) add up the steps of the journal
(:mod:`workload_domain.agent.journal`); both import it from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from workload_domain.jsonvalues import JsonObject

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """What agent steps consumed: calls made and tokens reported."""

    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def to_json(self) -> JsonObject:
        """The ``usage`` object of the API."""
        return {
            "model_calls": self.model_calls,
            "tool_calls": self.tool_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.model_calls + other.model_calls,
            self.tool_calls + other.tool_calls,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
        )

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of ``usages``."""
        result = cls()
        for usage in usages:
            result = result + usage
        return result

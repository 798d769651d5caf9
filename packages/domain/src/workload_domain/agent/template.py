"""Prompt interpolation (SPEC §11): ``{{input.<field>}}`` and ``{{upstream.<task_key>}}`` only.

References are spelled exactly so, without spaces; anything else between braces is text.
Strings are inserted as they are, other values as compact JSON; the result is produced in one
pass, so inserted text is never interpolated again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from workload_domain.errors import quoted

__all__ = ["TEMPLATE_ERROR", "TemplateError", "render_prompt"]

TEMPLATE_ERROR = "template_error"

_REFERENCE = re.compile(r"\{\{(input|upstream)\.([^{}\s]+)\}\}")


class TemplateError(Exception):
    """A reference to a run-input field or a dependency that is not there."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def render_prompt(prompt: str, run_input: Mapping[str, Any], upstream: Mapping[str, Any]) -> str:
    """The prompt with every reference replaced (raises :class:`TemplateError`)."""

    def replace(match: re.Match[str]) -> str:
        source, name = match.group(1), match.group(2)
        values = run_input if source == "input" else upstream
        if name not in values:
            what = "the run input has no field" if source == "input" else "no direct dependency"
            raise TemplateError(f"{match.group(0)}: {what} {quoted(name)}")
        value = values[name]
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    return _REFERENCE.sub(replace, prompt)

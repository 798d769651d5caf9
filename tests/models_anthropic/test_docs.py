"""docs/models.md's Anthropic section says what the code does, and its example runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import workload_model_anthropic as adapter

DOCS = Path(__file__).resolve().parents[2] / "docs"


def section() -> str:
    """The page's Anthropic section: from its heading to the next one of the same level."""
    text = (DOCS / "models.md").read_text(encoding="utf-8")
    _, heading, rest = text.partition("\n## Anthropic\n")
    assert heading, "docs/models.md has no Anthropic section"
    return re.split(r"^## ", rest, flags=re.M)[0]


def test_the_section_states_the_codes_defaults() -> None:
    text = " ".join(section().split())

    assert f"defaults to `{adapter.DEFAULT_BASE_URL}`" in text
    assert f"or **{adapter.DEFAULT_MAX_OUTPUT_TOKENS}** when it sets none" in text
    assert f"one more tool, `{adapter.ANSWER_TOOL}`" in text
    assert f"is `{adapter.ANSWER_TOOL}_2`" in text


def test_the_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = re.findall(r"^```python\n(.*?)^```", section(), re.S | re.M)
    namespace: dict[str, Any] = {"__name__": "models_md_anthropic"}

    exec(compile(example, "docs/models.md Anthropic example", "exec"), namespace)

    printed = capsys.readouterr().out
    assert re.fullmatch(
        r"the model server at http://127\.0\.0\.1:\d+ failed \(HTTP 529\): overloaded\n", printed
    )

"""docs/models.md says what the code does: its variables and defaults, and its example runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import workload_model_openai as adapter

DOCS = Path(__file__).resolve().parents[2] / "docs"


def page() -> str:
    """The page up to its Anthropic section (tests/models_anthropic/test_docs.py reads that)."""
    return (DOCS / "models.md").read_text(encoding="utf-8").split("\n## Anthropic\n")[0]


def test_the_variables_table_matches_the_code() -> None:
    rows = re.findall(r"^\| `(WORKLOAD_[A-Z_]+)` \|.*\| `?([^|`]+)`? \|$", page(), re.M)

    assert rows == [
        (adapter.BASE_URL_VARIABLE, "unset"),
        (adapter.API_KEY_VARIABLE, adapter.DEFAULT_API_KEY),
        (adapter.TIMEOUT_VARIABLE, f"{adapter.DEFAULT_TIMEOUT_SECONDS:g}"),
    ]
    assert f"(0, {adapter.MAX_TIMEOUT_SECONDS:g}]" in page()


def test_the_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    (example,) = re.findall(r"^```python\n(.*?)^```", page(), re.S | re.M)
    namespace: dict[str, Any] = {"__name__": "models_md"}

    exec(compile(example, "docs/models.md example", "exec"), namespace)

    printed = capsys.readouterr().out
    assert re.fullmatch(
        r"the model server at http://127\.0\.0\.1:\d+/v1 is rate limiting \(HTTP 429\): "
        r"slow down\n",
        printed,
    )

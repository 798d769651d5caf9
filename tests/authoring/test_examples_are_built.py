"""The examples are written in Python (SPEC §17); their JSON files are the same definitions.

``examples/*.json`` stay for readers who write JSON (and for ``workload workflows create``):
compiled by the server's compiler each must be exactly the definition built in Python, hash
included — the pipeline by ``workload_worker.examples.textstats.textstats``, the agent by the
demo's ``agent_workflow`` (``workload demo --agent``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workload_cli._demo_agent import agent_workflow
from workload_domain.compiler import compile_definition
from workload_worker import Workflow
from workload_worker.examples.textstats import textstats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("name", "built"),
    [
        ("textstats_workflow.json", textstats),
        ("agent_workflow.json", agent_workflow("summarize-text")),
        (
            "agent_workflow_openai.json",
            agent_workflow("summarize-text-openai", model="openai:llama3.2"),
        ),
    ],
)
def test_the_json_example_is_the_workflow_built_in_python(name: str, built: Workflow) -> None:
    written = json.loads((EXAMPLES / name).read_text(encoding="utf-8"))
    compiled = compile_definition(written)
    assert compiled.document() == built.definition()
    assert compiled.definition_hash == built.definition_hash()

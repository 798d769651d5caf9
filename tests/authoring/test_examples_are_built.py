"""The example pipeline is written in Python (SPEC §17); its JSON file is the same definition.

``examples/textstats_workflow.json`` stays for readers who write JSON (and for
``workload workflows create``): compiled by the server's compiler it must be exactly the
definition ``workload_worker.examples.textstats.textstats`` builds, hash included.
"""

from __future__ import annotations

import json
from pathlib import Path

from workload_domain.compiler import compile_definition
from workload_worker.examples.textstats import textstats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_textstats_json_is_the_workflow_built_in_python() -> None:
    written = json.loads((EXAMPLES / "textstats_workflow.json").read_text(encoding="utf-8"))
    compiled = compile_definition(written)
    assert compiled.document() == textstats.definition()
    assert compiled.definition_hash == textstats.definition_hash()

"""The examples of docs/worker.md run as written (they define workers and call handlers)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from workload_worker import Context, NonRetryableError, Worker

DOCS = Path(__file__).resolve().parents[2] / "docs"


def blocks(name: str, language: str) -> list[str]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.S | re.M)


def test_worker_md_examples_run(tmp_path: Path) -> None:
    examples = blocks("worker.md", "python")
    assert len(examples) >= 8
    namespace: dict[str, Any] = {"__name__": "worker_md"}  # not "__main__": run() is skipped
    for i, block in enumerate(examples, start=1):
        exec(compile(block, f"docs/worker.md example {i}", "exec"), namespace)
    worker = namespace["worker"]
    assert isinstance(worker, Worker)
    assert worker.actions == [
        "charge",
        "checksum",
        "crunch",
        "fetch_document",
        "greet",
        "import_rows",
        "summarize",
    ]
    # The handlers do what the page says.
    data = tmp_path / "data.bin"
    data.write_bytes(b"abc")
    assert namespace["checksum"](Context.standalone(), {"path": str(data)})["bytes"] == 3
    ctx = Context.standalone()
    assert namespace["import_rows"](ctx, {"rows": [1, 2]}) == {"imported": 2}
    assert ctx.progress == {"rows_done": 2, "rows_total": 2}
    assert namespace["crunch"](Context.standalone(), {"n": 4}) == {"total": 14}
    with pytest.raises(namespace["DocumentMissing"]) as missing:
        anyio.run(namespace["fetch_document"], Context.standalone(), {"doc_id": -1})
    assert isinstance(missing.value, NonRetryableError)
    ctx = Context.standalone(run_id="r", task_key="t")
    assert anyio.run(namespace["charge"], ctx, {"amount": 5}) == {"charged": 5, "key": "r:t"}

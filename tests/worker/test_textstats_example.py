"""The shipped example worker: its handlers on a real directory, then the worker running them.

``workload_worker.examples.textstats`` ships inside workload-worker (``workload demo`` starts it).

First the handlers are called directly (no server) with a standalone context; then the example's
worker runs the three tasks against the fake control plane, each fed its dependency's output as
``upstream`` like the server does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.worker.conftest import MakeWorker, eventually, serving
from tests.worker.fake_server import FakeControlPlane
from workload_worker import Context, NonRetryableError
from workload_worker.examples import textstats

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POEM = "The quick brown fox\njumps over the lazy dog.\nThe fox, the fox!\n"
PROSE = "Leases keep workers honest. Heartbeats keep leases alive; leases expire.\n" * 3


@pytest.fixture
def texts(tmp_path: Path) -> Path:
    directory = tmp_path / "texts"
    (directory / "nested").mkdir(parents=True)
    (directory / "poem.txt").write_text(POEM, encoding="utf-8")
    (directory / "prose.md").write_text(PROSE, encoding="utf-8")
    (directory / "data.csv").write_text("a,b\n", encoding="utf-8")
    (directory / "nested" / "deep.txt").write_text("deep words here\n", encoding="utf-8")
    return directory


@pytest.mark.anyio
async def test_list_files_finds_the_text_files(texts: Path) -> None:
    ctx = Context.standalone(run_input={"directory": str(texts)})
    listed = await textstats.list_files(ctx, {})
    assert [Path(f).name for f in listed["files"]] == ["poem.txt", "prose.md"]
    assert listed["count"] == 2
    deep = await textstats.list_files(ctx, {"recursive": True, "patterns": ["*.txt"]})
    assert sorted(Path(f).name for f in deep["files"]) == ["deep.txt", "poem.txt"]
    given = await textstats.list_files(ctx, {"paths": [str(texts / "data.csv")]})
    assert given == {"files": [str(texts / "data.csv")], "count": 1}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("input", "code"),
    [
        ({}, "invalid_input"),
        ({"directory": "/no/such/dir"}, "directory_not_found"),
        ({"paths": ["/no/such/file.txt"]}, "file_not_found"),
    ],
    ids=["nothing", "no-directory", "no-file"],
)
async def test_list_files_refuses_what_cannot_work(input: dict[str, Any], code: str) -> None:
    with pytest.raises(NonRetryableError) as caught:
        await textstats.list_files(Context.standalone(), input)
    assert caught.value.code == code


def test_text_stats_counts_words_lines_characters_and_top_words(texts: Path) -> None:
    ctx = Context.standalone(upstream={"list": {"files": [str(texts / "poem.txt")]}})
    stats = textstats.text_stats(ctx, {"top": 2})
    [poem] = stats["files"]
    assert poem["words"] == 13
    assert poem["lines"] == 3
    assert poem["characters"] == len(POEM)
    assert poem["unique_words"] == 8
    assert poem["top_words"] == [["fox", 3], ["quick", 1]]  # "the" is a stopword
    assert poem["reading_time_seconds"] == 4  # 13 words at 200 a minute
    assert stats["totals"]["words"] == 13
    assert ctx.progress == {"files_done": 1, "files_total": 1}
    with_stopwords = textstats.text_stats(ctx, {"top": 1, "keep_stopwords": True})
    assert with_stopwords["totals"]["top_words"] == [["the", 4]]


def test_text_stats_reports_a_missing_file_and_goes_on(texts: Path) -> None:
    files = [str(texts / "gone.txt"), str(texts / "prose.md")]
    stats = textstats.text_stats(Context.standalone(), {"files": files})
    gone, prose = stats["files"]
    assert "error" in gone
    assert prose["words"] == 30
    assert stats["totals"]["files"] == 1
    assert stats["totals"]["top_words"][0] == ["leases", 9]


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_write_report_writes_one_file_per_task(texts: Path, tmp_path: Path, fmt: str) -> None:
    files = [str(texts / "poem.txt"), str(texts / "prose.md")]
    stats = textstats.text_stats(Context.standalone(), {"files": files})
    out = tmp_path / "reports"
    for attempt in (1, 2):  # a retried attempt rewrites the same report
        ctx = Context.standalone(
            run_id="run-9", task_key="report", attempt=attempt, upstream={"stats": stats}
        )
        written = textstats.write_report(ctx, {"format": fmt, "output_dir": str(out)})
    report = Path(written["report"])
    assert [p.name for p in out.iterdir()] == [report.name]
    assert report.name == f"textstats-run-9_report.{'md' if fmt == 'markdown' else 'json'}"
    text = report.read_text(encoding="utf-8")
    assert written["bytes"] == len(text.encode("utf-8"))
    if fmt == "markdown":
        assert text.startswith("# Text statistics (run-9)\n")
        assert "2 files, 43 words, 6 lines" in text
        assert "| poem.txt | 13 | 3 |" in text
        assert "1. leases (9)" in text
    else:
        document = json.loads(text)
        assert document["totals"]["words"] == 43
        assert [Path(f["path"]).name for f in document["files"]] == ["poem.txt", "prose.md"]


def test_write_report_needs_statistics_and_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NonRetryableError, match="text_stats"):
        textstats.write_report(Context.standalone(), {"output_dir": str(tmp_path)})
    stats = {"files": [], "totals": {"files": 0}}
    with pytest.raises(NonRetryableError, match="output_dir"):
        textstats.write_report(Context.standalone(upstream={"s": stats}), {})
    ctx = Context.standalone(upstream={"s": stats})
    with pytest.raises(NonRetryableError, match="format"):
        textstats.write_report(ctx, {"output_dir": str(tmp_path), "format": "pdf"})


def test_analyze_text_counts_a_text_given_in_the_input() -> None:
    stats = textstats.analyze_text(Context.standalone(), {"text": POEM, "top": 2})
    assert stats == {
        "characters": len(POEM),
        "lines": 3,
        "words": 13,
        "unique_words": 8,
        "average_word_length": 3.62,  # 47 letters in 13 words
        "reading_time_seconds": 4,
        "top_words": [["fox", 3], ["quick", 1]],
    }
    assert len(textstats.analyze_text(Context.standalone(), {"text": PROSE})["top_words"]) == 5


@pytest.mark.parametrize("text", [None, 42, ["a"]], ids=["missing", "number", "list"])
def test_analyze_text_needs_a_text(text: Any) -> None:
    with pytest.raises(NonRetryableError) as caught:
        textstats.analyze_text(Context.standalone(), {} if text is None else {"text": text})
    assert caught.value.code == "invalid_input"


def test_the_workflows_wire_the_worker_s_actions() -> None:
    definition = json.loads((EXAMPLES / "textstats_workflow.json").read_text(encoding="utf-8"))
    tasks = {task["key"]: task for task in definition["tasks"]}
    assert tasks["stats"]["depends_on"] == ["list"]
    assert tasks["report"]["depends_on"] == ["stats"]
    agent = json.loads((EXAMPLES / "agent_workflow.json").read_text(encoding="utf-8"))
    (task,) = agent["tasks"]
    tools = {tool["action"] for tool in task["input"]["tools"]} - {"mock"}
    pipeline = {task["action"] for task in tasks.values()}
    assert pipeline | tools == set(textstats.worker.actions)


@pytest.mark.anyio
async def test_the_example_worker_runs_the_pipeline(
    fake: FakeControlPlane, make_worker: MakeWorker, texts: Path, tmp_path: Path
) -> None:
    # The example's handlers on a worker wired to the fake; the server's part (feeding each task
    # its dependency's output) is played here.
    worker = make_worker()
    worker.action("list_files")(textstats.list_files)
    worker.action("text_stats")(textstats.text_stats)
    worker.action("write_report")(textstats.write_report)
    worker.action("analyze_text")(textstats.analyze_text)
    assert worker.actions == textstats.worker.actions
    run_input = {"directory": str(texts), "output_dir": str(tmp_path / "out")}
    listing = fake.add("list_files", run_input=run_input)
    async with serving(worker):
        await eventually(lambda: fake.recorded(listing.attempt_id))
        stats = fake.add("text_stats", run_input=run_input, upstream={"list": listing.output})
        await eventually(lambda: fake.recorded(stats.attempt_id))
        report = fake.add("write_report", run_input=run_input, upstream={"stats": stats.output})
        await eventually(lambda: fake.recorded(report.attempt_id))
    assert report.output is not None
    written = await anyio.Path(report.output["report"]).read_text(encoding="utf-8")
    assert written.startswith("# Text")
    assert stats.output is not None
    assert stats.output["totals"]["files"] == 2


@pytest.mark.anyio
async def test_the_example_worker_serves_an_agents_tool_call(
    fake: FakeControlPlane, make_worker: MakeWorker
) -> None:
    worker = make_worker()
    worker.action("analyze_text")(textstats.analyze_text)
    call = fake.add("analyze_text", {"text": POEM}, kind="tool_call", tool_call_id="call_1_2")
    async with serving(worker):
        await eventually(lambda: fake.recorded(call.attempt_id))
    assert call.output is not None
    assert (call.output["words"], call.output["top_words"][0]) == (13, ["fox", 3])

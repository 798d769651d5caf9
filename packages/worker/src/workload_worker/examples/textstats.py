"""A worker that does real local work: text statistics of files, and a report of them.

Three actions, wired by the workflow :data:`textstats` (list → stats → report; its JSON is
``examples/textstats_workflow.json``), each task passing its output to the next through
``upstream``, and a fourth one for agents:

- ``list_files`` (async): the text files of a directory (``directory``, ``patterns``,
  ``recursive``), or the ``paths`` given;
- ``text_stats`` (sync, in a thread): words, lines, characters, unique and top words and
  reading time of each file, and totals; it heartbeats its progress after each file and stops
  early if the worker tells it to (``ctx.cancelled``);
- ``write_report`` (sync): a Markdown or JSON report in ``output_dir``. The file is named
  after ``ctx.idempotency_key``, so a retried attempt rewrites the same report rather than
  adding a second one;
- ``analyze_text`` (sync): the statistics of a ``text`` given in the input; the agent of
  ``examples/agent_workflow.json`` calls it as its ``text_stats`` tool.

Settings come from the task's input, else from the run's input (``directory``, ``paths``,
``output_dir``). The worker reads any file the workflow names: run it for workflows you trust.

Run it against a development server (``workload serve`` stores a worker token the command
finds on its own)::

    workload worker workload_worker.examples.textstats:worker
    workload workflows apply workload_worker.examples.textstats
    workload runs start textstats --input '{"directory": "docs", "output_dir": "reports"}' --wait
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from workload_worker import Context, NonRetryableError, Worker, Workflow

__all__ = ["analyze_text", "list_files", "text_stats", "textstats", "worker", "write_report"]

worker = Worker(queues=["default"], concurrency=4)

WORDS_PER_MINUTE = 200
MAX_FILES = 500
MAX_FILE_BYTES = 5 * 1024 * 1024
DEFAULT_PATTERNS = ("*.txt", "*.md")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*")
# Left out of the top words (they are still counted as words).
_COMMON_WORDS = (
    "a also an and are as at be been but by can did do does for from has have he her his i "
    "if in into is it its no not of on or our over she so than that the their them then "
    "there they this to too under very was we were what when which who will with you your"
)
_STOPWORDS = frozenset(_COMMON_WORDS.split())


def _setting(ctx: Context, input: Mapping[str, Any], name: str) -> Any:
    """A setting of the task's input, else of the run's input."""
    return input.get(name, ctx.run_input.get(name))


def _upstream(ctx: Context, key: str) -> Any:
    """The ``key`` of the first upstream output that has one."""
    for output in ctx.upstream.values():
        if isinstance(output, Mapping) and key in output:
            return output[key]
    return None


# -- list_files ---------------------------------------------------------------------------------


@worker.action("list_files")
async def list_files(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """The files to read: ``paths`` as given, or a directory's files matching ``patterns``."""
    paths = _setting(ctx, input, "paths")
    if paths is not None:
        files = [str(await anyio.Path(p).resolve()) for p in paths]
        missing = [p for p in files if not await anyio.Path(p).is_file()]
        if missing:
            raise NonRetryableError(f"not files: {', '.join(missing)}", code="file_not_found")
        return {"files": files, "count": len(files)}
    directory = _setting(ctx, input, "directory")
    if not directory:
        raise NonRetryableError("give a directory or paths", code="invalid_input")
    root = anyio.Path(directory)
    if not await root.is_dir():
        raise NonRetryableError(f"no directory {directory!r}", code="directory_not_found")
    patterns = input.get("patterns") or list(DEFAULT_PATTERNS)
    found: set[str] = set()
    for pattern in patterns:
        matches = root.rglob(pattern) if input.get("recursive") else root.glob(pattern)
        async for path in matches:
            if await path.is_file():
                found.add(str(await path.resolve()))
    if len(found) > MAX_FILES:
        raise NonRetryableError(f"{len(found)} files, more than {MAX_FILES}", code="too_many_files")
    return {"directory": str(await root.resolve()), "files": sorted(found), "count": len(found)}


# -- text_stats ---------------------------------------------------------------------------------


def _words(text: str, *, keep_stopwords: bool) -> list[str]:
    words = [w.lower().replace("’", "'") for w in _WORD.findall(text)]
    return words if keep_stopwords else [w for w in words if w not in _STOPWORDS]


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _reading_seconds(words: int) -> int:
    return round(words * 60 / WORDS_PER_MINUTE)


def text_statistics(
    text: str, *, top: int, keep_stopwords: bool
) -> tuple[dict[str, Any], Counter[str]]:
    """A text's statistics, and the counts of its (counted) words."""
    all_words = _words(text, keep_stopwords=True)
    counted = Counter(_words(text, keep_stopwords=keep_stopwords))
    average = round(sum(map(len, all_words)) / len(all_words), 2) if all_words else 0
    stats = {
        "characters": len(text),
        "lines": _line_count(text),
        "words": len(all_words),
        "unique_words": len(set(all_words)),
        "average_word_length": average,
        "reading_time_seconds": _reading_seconds(len(all_words)),
        "top_words": [[word, n] for word, n in counted.most_common(top)],
    }
    return stats, counted


def file_stats(
    path: Path, *, top: int, keep_stopwords: bool
) -> tuple[dict[str, Any], Counter[str]]:
    """One file's statistics, and the counts of its (counted) words."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return {"path": str(path), "error": f"{size} bytes, over {MAX_FILE_BYTES}"}, Counter()
    text = path.read_bytes().decode("utf-8", errors="replace")
    stats, counted = text_statistics(text, top=top, keep_stopwords=keep_stopwords)
    return {"path": str(path), "bytes": size, **stats}, counted


def _totals(files: Iterable[dict[str, Any]], counts: Counter[str], top: int) -> dict[str, Any]:
    read = [f for f in files if "error" not in f]
    words = sum(f["words"] for f in read)
    return {
        "files": len(read),
        "characters": sum(f["characters"] for f in read),
        "lines": sum(f["lines"] for f in read),
        "words": words,
        "reading_time_seconds": _reading_seconds(words),
        "top_words": [[word, n] for word, n in counts.most_common(top)],
    }


@worker.action("text_stats")
def text_stats(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """Statistics of each file (``files``, else the upstream ``list_files`` output) and totals."""
    files = input.get("files") or _upstream(ctx, "files")
    if not isinstance(files, list):
        raise NonRetryableError(
            "no files: give files or depend on list_files", code="invalid_input"
        )
    top = int(input.get("top", 10))
    keep_stopwords = bool(input.get("keep_stopwords", False))
    results: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for done, name in enumerate(files, start=1):
        if ctx.cancelled.is_set():
            return {}  # the worker no longer waits for this result: stop early
        path = Path(name)
        try:
            stats, counted = file_stats(path, top=top, keep_stopwords=keep_stopwords)
        except OSError as exc:  # gone or unreadable since it was listed: say so, go on
            stats, counted = {"path": name, "error": exc.strerror or str(exc)}, Counter()
        results.append(stats)
        counts.update(counted)
        ctx.heartbeat({"files_done": done, "files_total": len(files)})
    return {"files": results, "totals": _totals(results, counts, top)}


# -- analyze_text (an agent's tool) ------------------------------------------------------------


@worker.action("analyze_text")
def analyze_text(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """Statistics of the ``text`` given (``top``: how many top words, default 5).

    Written to be an agent's tool (``examples/agent_workflow.json``): the model calls it with
    ``{"text": …}`` and reads the statistics back. It works as a task's action too.
    """
    text = input.get("text")
    if not isinstance(text, str):
        raise NonRetryableError("give the text to analyse as text", code="invalid_input")
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        raise NonRetryableError(f"the text is over {MAX_FILE_BYTES} bytes", code="too_large")
    stats, _ = text_statistics(text, top=int(input.get("top", 5)), keep_stopwords=False)
    return stats


# -- write_report -------------------------------------------------------------------------------


def _minutes(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60:02d} s"


def render_markdown(stats: Mapping[str, Any], title: str) -> str:
    """The statistics as a Markdown report."""
    totals = stats["totals"]
    lines = [
        f"# {title}",
        "",
        f"{totals['files']} files, {totals['words']} words, {totals['lines']} lines, "
        f"{totals['characters']} characters; "
        f"reading time {_minutes(totals['reading_time_seconds'])}.",
        "",
        "| file | words | lines | characters | unique words | reading time |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for item in stats["files"]:
        name = Path(item["path"]).name
        if "error" in item:
            lines.append(f"| {name} | error: {item['error']} | | | | |")
            continue
        lines.append(
            f"| {name} | {item['words']} | {item['lines']} | {item['characters']} | "
            f"{item['unique_words']} | {_minutes(item['reading_time_seconds'])} |"
        )
    lines += ["", "## Top words", ""]
    lines += [f"{rank}. {word} ({n})" for rank, (word, n) in enumerate(totals["top_words"], 1)]
    return "\n".join(lines) + "\n"


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a crash mid-write leaves the previous report)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@worker.action("write_report")
def write_report(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """Write the upstream ``text_stats`` output as a report in ``output_dir``."""
    stats = input.get("stats") or {
        "files": _upstream(ctx, "files"),
        "totals": _upstream(ctx, "totals"),
    }
    if not isinstance(stats.get("totals"), Mapping):
        raise NonRetryableError("no statistics: depend on text_stats", code="invalid_input")
    output_dir = _setting(ctx, input, "output_dir")
    if not output_dir:
        raise NonRetryableError("give output_dir", code="invalid_input")
    fmt = input.get("format", "markdown")
    if fmt not in {"markdown", "json"}:
        raise NonRetryableError(f"format {fmt!r}: markdown or json", code="invalid_input")
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    # One name per task, whatever the attempt: a retry replaces the report, never adds one.
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", ctx.idempotency_key)
    path = directory / f"textstats-{stem}.{'md' if fmt == 'markdown' else 'json'}"
    title = input.get("title") or f"Text statistics ({ctx.run_id})"
    text = (
        render_markdown(stats, title)
        if fmt == "markdown"
        else json.dumps({"title": title, **stats}, indent=2, ensure_ascii=False) + "\n"
    )
    _write_atomically(path, text)
    return {"report": str(path.resolve()), "format": fmt, "bytes": len(text.encode("utf-8"))}


# -- the workflow, written next to its handlers (SPEC §17) ---------------------------------------

textstats = Workflow(
    "textstats",
    description="Text statistics of a directory's files, written as a report "
    "(worker: workload_worker.examples.textstats)",
)
"""list → stats → report. ``examples/textstats_workflow.json`` is its definition as JSON (a
test keeps the two equal); ``workload workflows apply workload_worker.examples.textstats``
applies it."""
_listed = textstats.task("list", list_files, input={"patterns": list(DEFAULT_PATTERNS)})
_stats = textstats.task(
    "stats",
    text_stats,
    depends_on=[_listed],
    input={"top": 10},
    timeout_seconds=600,
    max_attempts=3,
    initial_backoff_seconds=1,
)
textstats.task(
    "report", write_report, depends_on=[_stats], input={"format": "markdown"}, max_attempts=2
)

"""``workload demo --agent``: an agent that calls two tools and answers with checked JSON.

The agent (SPEC §11) summarizes a text given as the run's input. Its model — the deterministic
``mock`` model, following a ``script`` — first calls two tools at once: ``note`` (action
``mock``, run inside the control plane) and ``text_stats`` (action ``analyze_text``, served by
the example worker of ``workload_worker.examples.textstats``, which the demo starts). Then it
answers with a JSON object that ``output_schema`` checks. ``examples/agent_workflow.json`` is
this definition and ``examples/agent_workflow_openai.json`` the same with ``openai:llama3.2`` and
no script (a test keeps the files equal to :func:`agent_definition`).

Without the example worker, ``text_stats`` is a ``mock`` tool too, whose answer is the one the
worker would give, written in the script.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from workload_cli._session import Session
from workload_cli._views import STEP_COLUMNS, usage_text

if TYPE_CHECKING:  # the worker SDK is imported when a definition is built, not at start-up
    from workload_worker import Tool, Workflow

__all__ = [
    "AGENT_TASK",
    "AGENT_WORKFLOW_ID",
    "SAMPLE_STATS",
    "SAMPLE_TEXT",
    "Summary",
    "agent_definition",
    "agent_workflow",
    "show_agent_outcome",
]

AGENT_WORKFLOW_ID = "demo-agent"
AGENT_TASK = "summarize"
MOCK_MODEL = "mock"
SAMPLE_TEXT = (
    "Workload is a control plane for workflows: graphs of tasks with dependencies, timeouts "
    "and retries. A run is committed to PostgreSQL before its tasks execute, workers claim "
    "remote tasks under leases, and an agent task journals every model call and tool call, so "
    "that a crash never repeats a finished call."
)
SAMPLE_STATS: dict[str, Any] = {
    "characters": 305,
    "lines": 1,
    "words": 51,
    "unique_words": 41,
    "average_word_length": 4.86,
    "reading_time_seconds": 15,
    "top_words": [["tasks", 3], ["call", 3], ["workload", 1], ["control", 1], ["plane", 1]],
}
"""What the example worker's ``analyze_text`` answers for :data:`SAMPLE_TEXT`."""

_PLAN = {"plan": "count the words with text_stats, then summarize in one sentence"}
_ANSWER = {
    "summary": "Workload runs workflows durably: every run is committed before it executes, "
    "workers hold leases, and agents journal their calls so that a crash repeats no finished one.",
    "words": SAMPLE_STATS["words"],
    "reading_time_seconds": SAMPLE_STATS["reading_time_seconds"],
    "keywords": ["workflows", "leases", "journal"],
}

# The tools' arguments and the answer, as pydantic models: the builder (SPEC §17) turns them
# into the JSON Schemas the definition carries (``extra="forbid"``: no field beyond these).


class Note(BaseModel):
    """A note to write down (the mock action echoes ``output`` back)."""

    model_config = ConfigDict(extra="forbid")
    output: dict[str, Any] = Field(description='The note, e.g. {"plan": "..."}')


class Text(BaseModel):
    """A text to analyse."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="The text to analyse.")


class MockStats(BaseModel):
    """The statistics the mock answers."""

    model_config = ConfigDict(extra="forbid")
    output: dict[str, Any]


class Summary(BaseModel):
    """A text's summary in one sentence, its word count, reading time and keywords."""

    model_config = ConfigDict(extra="forbid")
    summary: str
    words: int = Field(ge=0)
    reading_time_seconds: int = Field(ge=0)
    keywords: list[str] = Field(max_length=5)


_TEXT_STATS = (
    "Count the words, unique words, lines and characters of a text, estimate its reading time "
    "in seconds, and list its most frequent words."
)


def _tools(remote: bool) -> list[Tool]:
    from workload_worker import tool  # noqa: PLC0415 - see TYPE_CHECKING above

    note = tool(
        "mock",
        name="note",
        description="Write down a note, such as your plan; the note is echoed back. "
        "(The built-in mock action: it runs inside the control plane.)",
        parameters=Note,
    )
    if remote:  # the example worker's handler: its action's name comes from its declaration
        from workload_worker.examples.textstats import analyze_text  # noqa: PLC0415

        stats = tool(analyze_text, name="text_stats", description=_TEXT_STATS, parameters=Text)
    else:
        stats = tool(
            "mock",
            name="text_stats",
            description=_TEXT_STATS + " (Here a mock: it answers the statistics given as output.)",
            parameters=MockStats,
        )
    return [note, stats]


def _script(remote: bool) -> list[dict[str, Any]]:
    text_call = {"text": SAMPLE_TEXT} if remote else {"output": SAMPLE_STATS}
    return [
        {
            "tool_calls": [
                {"name": "note", "arguments": {"output": _PLAN}},
                {"name": "text_stats", "arguments": text_call},
            ]
        },
        {"content": json.dumps(_ANSWER)},
    ]


def agent_workflow(
    workflow_id: str = AGENT_WORKFLOW_ID, *, remote: bool = True, model: str = MOCK_MODEL
) -> Workflow:
    """The agent workflow, built in Python: one ``agent`` task that summarizes ``input.text``.

    Args:
        workflow_id: The workflow's id.
        remote: Whether ``text_stats`` is served by the example worker (else a mock tool).
        model: ``mock`` (with its script), or another model (``openai:…``, no script).
    """
    from workload_worker import Workflow  # noqa: PLC0415 - see TYPE_CHECKING above

    workflow = Workflow(
        workflow_id,
        description="An agent summarizes a text: a note taken in-process, statistics from "
        "a worker's tool, an answer checked against a JSON Schema",
    )
    workflow.agent(
        AGENT_TASK,
        model=model,
        instructions="You are a concise technical editor. Use the tools for facts; never guess "
        "a number. Answer with one JSON object only, with the fields summary (one sentence), "
        "words, reading_time_seconds and keywords (at most five).",
        prompt="Summarize this text for a newcomer, with its word count and reading time "
        "from the text_stats tool.\n\nText: {{input.text}}",
        tools=_tools(remote),
        budget={"max_model_calls": 6, "max_tool_calls": 6, "max_seconds": 300},
        output_type=Summary,
        script=_script(remote) if model == MOCK_MODEL else None,
        timeout_seconds=600,
        max_attempts=2,
        initial_backoff_seconds=1,
    )
    return workflow


def agent_definition(
    workflow_id: str = AGENT_WORKFLOW_ID, *, remote: bool = True, model: str = MOCK_MODEL
) -> dict[str, Any]:
    """The definition of :func:`agent_workflow` (SPEC §3), as the server stores it."""
    return agent_workflow(workflow_id, remote=remote, model=model).definition()


def show_agent_outcome(s: Session, run_id: str) -> None:
    """After the run: its agent's steps (stdout), then its usage and answer (stderr).

    With ``--output json`` only the messages: stdout holds the final run alone.
    """
    client, out = s.client, s.out
    if not out.is_json:
        out.listing(client.runs.steps(run_id, AGENT_TASK, limit=200), STEP_COLUMNS)
    run = client.runs.get(run_id)
    out.say(f"usage: {usage_text(run.usage) or 'none'}")
    task = client.runs.task(run_id, AGENT_TASK)
    structured = (task.output or {}).get("structured")
    if structured is not None:
        out.say("answer (checked against output_schema): " + json.dumps(structured))
    out.say(f"the journal again: workload runs steps {run_id} {AGENT_TASK}")

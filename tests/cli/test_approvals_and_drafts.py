"""``workload approvals …`` and ``workload drafts …`` (SPEC §11) against the live API.

A decision names what the command showed (the digest, the hash): a transport that alters what
the server answers in between stands for an approval or a draft that changed meanwhile. The
prompt itself needs a terminal: the last tests run the command on a pseudo-terminal, over real
HTTP (``real_http_only``).
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter

from tests.cli.conftest import Cli
from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_cli._exit import ExitCode, exit_code_for_error
from workload_sdk import Approval, Draft, DraftWaitTimeout, Version, Workflow

V1 = "/api/v1"
MISSING = "00000000-0000-7000-8000-000000000000"
ARGUMENTS = {"output": {"env": "prod", "note": "caf\u00e9 \u202eevil"}}
DEPLOYER: dict[str, Any] = {
    "id": "deployer",
    "tasks": [
        {
            "key": "agent",
            "action": "agent",
            "input": {
                "model": "mock",
                "prompt": "deploy",
                "tools": [
                    {
                        "name": "deploy",
                        "action": "mock",  # runs in-process once approved
                        "requires_approval": True,
                        "parameters": {"type": "object"},
                    }
                ],
                "script": [
                    {"tool_calls": [{"name": "deploy", "arguments": ARGUMENTS}]},
                    {"content": "done"},
                ],
            },
        }
    ],
}
NIGHTLY: dict[str, Any] = {
    "id": "nightly-report",
    "description": "fetch, summarize, mail",
    "tasks": [
        {"key": "mail", "action": "mock", "depends_on": ["summarize", "fetch"]},
        {"key": "fetch", "action": "mock", "input": {"output": {"rows": 3}}},
        {"key": "summarize", "action": "mock", "depends_on": ["fetch"]},
    ],
}
SELF_LOOP = {"id": "nightly-report", "tasks": [{"key": "a", "action": "mock", "depends_on": ["a"]}]}
PROMPT = "every night, fetch the rows, summarize them and mail the summary"
DAG = [
    "dag (topological order)",
    "  fetch      mock",
    "  summarize  mock  depends on fetch",
    "  mail       mock  depends on summarize, fetch",
]


def parse(model: Any, text: str) -> Any:
    return TypeAdapter(model).validate_json(text)


def turns(*definitions: Any) -> str:
    return json.dumps([{"content": json.dumps(d)} for d in definitions])


def pending_approval(cli: Cli, tmp_path: Path, live_api: LiveApi) -> Approval:
    """Start the deployer agent and return its approval, once pending."""
    path = tmp_path / "deployer.json"
    if not path.exists():
        path.write_text(json.dumps(DEPLOYER), encoding="utf-8")
        assert cli("workflows", "create", str(path)).exit_code == 0
    started = cli("runs", "start", "deployer", "--quiet")
    assert started.exit_code == 0, started.output
    run_id = started.stdout.strip()

    def found() -> dict[str, Any] | None:
        items = live_api.viewer.get(f"{V1}/approvals", params={"status": "pending"}).json()
        mine = [a for a in items["items"] if a["run_id"] == run_id]
        return mine[0] if mine else None

    return Approval.model_validate(wait_until(found, message="the approval is requested"))


def current(live_api: LiveApi, approval: Approval) -> Approval:
    answer = live_api.viewer.get(f"{V1}/approvals/{approval.approval_id}")
    return Approval.model_validate_json(answer.content)


def ready_draft(cli: Cli, tmp_path: Path, *definitions: Any) -> Draft:
    script = tmp_path / "script.json"
    script.write_text(turns(*definitions), encoding="utf-8")
    created = cli("drafts", "create", PROMPT, "--script", str(script), "--wait", "-o", "json")
    assert created.exit_code == 0, created.output
    draft: Draft = parse(Draft, created.stdout)
    return draft


class Altered(httpx.BaseTransport):
    """The live API, except that a GET of ``path`` answers ``field`` as ``value``: what the
    command shows is then not what the server holds (as if it changed in between)."""

    def __init__(self, inner: httpx.BaseTransport, path: str, field: str, value: str) -> None:
        self._inner, self._path, self._field, self._value = inner, path, field, value

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        if request.method != "GET" or request.url.path != self._path:
            return response
        body = {**json.loads(response.read()), self._field: self._value}
        return httpx.Response(response.status_code, json=body, request=request)


def altered(cli: Cli, live_api: LiveApi, path: str, field: str, value: str) -> Cli:
    assert live_api.transport is not None
    return Cli(cli.env, Altered(live_api.transport, path, field, value))


# -- approvals ---------------------------------------------------------------------------------


def test_approvals_list_and_show(cli: Cli, tmp_path: Path, live_api: LiveApi) -> None:
    approval = pending_approval(cli, tmp_path, live_api)
    listed = parse(list[Approval], cli("approvals", "list", "-o", "json").stdout)
    assert listed == [approval]
    assert (approval.tool, approval.task_key, approval.arguments) == ("deploy", "agent", ARGUMENTS)

    plain = cli("approvals", "list", "--status", "pending")
    assert plain.exit_code == 0, plain.output
    header, row = (line.split("\t") for line in plain.stdout.splitlines())
    assert header == [
        "APPROVAL",
        "STATUS",
        "RUN",
        "TASK",
        "TOOL",
        "ARGUMENTS",
        "REQUESTED",
        "EXPIRES",
        "DECIDED_BY",
    ]
    assert row[:5] == [approval.approval_id, "pending", approval.run_id, "agent", "deploy"]
    # JSON with non-ASCII escaped (\u202e), then plain text's own escape of each backslash.
    assert row[5] == json.dumps(ARGUMENTS, separators=(",", ":")).replace("\\", "\\\\")
    assert "\u202e" not in plain.stdout
    assert cli("approvals", "list", "--status", "approved").stdout.splitlines() == [
        "\t".join(header)
    ]
    assert (
        len(parse(list[Approval], cli("approvals", "list", "--limit", "1", "-o", "json").stdout))
        == 1
    )

    shown = cli("approvals", "show", approval.approval_id, "-o", "json")
    assert parse(Approval, shown.stdout) == approval


def test_approve_shows_the_call_and_sends_the_digest_it_showed(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    approval = pending_approval(cli, tmp_path, live_api)
    result = cli(
        "approvals", "approve", approval.approval_id, "--yes", "--comment", "ok for prod",
        "-o", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    decided: Approval = parse(Approval, result.stdout)  # stdout: the decided approval only
    assert (decided.status, decided.comment) == ("approved", "ok for prod")
    assert decided.decided_by is not None
    assert decided.decided_by.startswith("operator:")
    review = result.stderr.splitlines()
    assert review[:5] == [
        f"approval   {approval.approval_id} (pending, expires "
        f"{approval.expires_at:%Y-%m-%d %H:%M:%S} UTC)",
        f"run        {approval.run_id}",
        "task       agent",
        "tool       deploy",
        f"arguments  {approval.arguments_digest}",
    ]
    shown_arguments = "\n".join(line.removeprefix("  ") for line in review[5:-1])
    assert shown_arguments == json.dumps(ARGUMENTS, indent=2)  # exact, every non-ASCII escaped
    assert json.loads(shown_arguments) == approval.arguments
    assert review[-1] == "approved: deploy runs once, with exactly these arguments"

    run = live_api.wait_for_run(approval.run_id)
    assert run["status"] == "succeeded"
    steps = live_api.viewer.get(f"{V1}/runs/{approval.run_id}/tasks/agent/steps").json()
    (tool_step,) = [s for s in steps["items"] if s["kind"] == "tool_call"]
    assert tool_step["response"] == {"output": ARGUMENTS["output"]}

    again = cli("approvals", "approve", approval.approval_id, "--yes")
    assert again.exit_code == ExitCode.REJECTED
    assert "is already approved (409 approval_decided)" in again.stderr
    assert again.stdout == ""


def test_reject_tells_the_model_with_the_comment(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    approval = pending_approval(cli, tmp_path, live_api)
    result = cli("approvals", "reject", approval.approval_id, "-y", "--comment", "not today")
    assert result.exit_code == 0, result.output
    fields = dict(line.split("\t", 1) for line in result.stdout.splitlines())
    assert (fields["status"], fields["comment"]) == ("rejected", "not today")
    assert "rejected: deploy does not run; the model is told" in result.stderr
    assert live_api.wait_for_run(approval.run_id)["status"] == "succeeded"
    steps = live_api.viewer.get(f"{V1}/runs/{approval.run_id}/tasks/agent/steps").json()
    told = steps["items"][-1]["request"]["messages"][-1]["content"]
    assert "rejected" in told
    assert "not today" in told


def test_without_a_terminal_a_decision_needs_yes(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    approval = pending_approval(cli, tmp_path, live_api)
    for command in ("approve", "reject"):
        result = cli("approvals", command, approval.approval_id, input="y\n")
        assert result.exit_code == ExitCode.USAGE
        assert "nobody can confirm: standard input is not a terminal" in result.stderr
        assert "pass --yes" in result.stderr
        assert f"arguments  {approval.arguments_digest}" in result.stderr  # shown all the same
        assert result.stdout == ""
    assert current(live_api, approval).status == "pending"  # nothing was sent


def test_an_approval_that_changed_since_it_was_shown_is_not_decided(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    approval = pending_approval(cli, tmp_path, live_api)
    stale = "sha256:" + "0" * 64
    path = f"{V1}/approvals/{approval.approval_id}"
    result = altered(cli, live_api, path, "arguments_digest", stale)(
        "approvals", "approve", approval.approval_id, "--yes"
    )
    assert result.exit_code == ExitCode.REJECTED
    assert f"arguments  {stale}" in result.stderr  # what was shown, and sent
    assert "(409 approval_changed)" in result.stderr
    assert "nothing was decided: the approval is not what was shown above" in result.stderr
    assert result.stdout == ""
    assert current(live_api, approval).status == "pending"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("approve", MISSING, "--yes"), ExitCode.REJECTED, "404 not_found"),
        (("reject", "../runs", "--yes"), ExitCode.REJECTED, "404 not_found"),
        (("approve", "", "--yes"), ExitCode.REJECTED, "404 not_found"),
        (("show", "a b"), ExitCode.REJECTED, "404 not_found"),
        (("approve",), ExitCode.USAGE, "Missing argument"),
        (("list", "--status", "waiting"), ExitCode.USAGE, "'waiting' is not one of"),
        (("list", "--limit", "0"), ExitCode.USAGE, "--limit"),
        (("approve", "{id}", "--yes", "--idempotency-key", "a b"), ExitCode.USAGE, "1-255"),
        (("approve", "{id}", "--yes", "--comment", "x" * 4097), ExitCode.REJECTED, "/comment"),
        (("approve", "{id}"), ExitCode.USAGE, "nobody can confirm"),
    ],
    ids=[
        "unknown-id",
        "path-in-id",
        "empty-id",
        "space-in-id",
        "no-id",
        "bad-status",
        "zero-limit",
        "bad-idempotency-key",
        "comment-too-long",
        "no-confirmation",
    ],
)
def test_hostile_approval_arguments_decide_nothing(
    cli: Cli,
    tmp_path: Path,
    live_api: LiveApi,
    args: tuple[str, ...],
    code: int,
    message: str,
) -> None:
    approval = pending_approval(cli, tmp_path, live_api)
    result = cli("approvals", *(a.replace("{id}", approval.approval_id) for a in args))
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert result.stdout == ""
    assert current(live_api, approval).status == "pending"


# -- drafts ------------------------------------------------------------------------------------


def test_drafts_create_wait_show_approve(cli: Cli, tmp_path: Path, live_api: LiveApi) -> None:
    draft = ready_draft(cli, tmp_path, SELF_LOOP, NIGHTLY)
    assert (draft.status, draft.workflow_id, [p.answer for p in draft.problems]) == (
        "ready",
        "nightly-report",
        [1],
    )
    assert draft.definition is not None
    assert draft.definition_hash is not None

    shown = cli("drafts", "show", draft.draft_id)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    fields = dict(line.split("\t", 1) for line in lines if "\t" in line)
    assert fields["status"] == "ready"
    assert fields["definition_hash"] == draft.definition_hash
    assert fields["prompt"] == PROMPT
    assert fields["usage"].startswith("model_calls=2 ")
    problems = lines.index("problems (1)")
    assert (
        lines[problems + 1] == "  answer 1: /tasks/0/depends_on/0: a task cannot depend on itself"
    )
    start, end = lines.index("definition"), lines.index(DAG[0])
    definition = json.loads("\n".join(line.removeprefix("  ") for line in lines[start + 1 : end]))
    assert definition == draft.definition
    assert lines[end:] == DAG
    table = cli("drafts", "show", draft.draft_id, "-o", "table", env={"COLUMNS": "200"})
    assert table.stdout.splitlines()[-4:] == DAG
    assert parse(Draft, cli("drafts", "show", draft.draft_id, "-o", "json").stdout) == draft

    listed = parse(list[Draft], cli("drafts", "list", "-o", "json").stdout)
    assert [d.draft_id for d in listed] == [draft.draft_id]
    plain = cli("drafts", "list").stdout.splitlines()
    assert plain[0].split("\t") == [
        "DRAFT",
        "STATUS",
        "WORKFLOW",
        "VERSION",
        "MODEL",
        "TASKS",
        "PROBLEMS",
        "CREATED",
        "PROMPT",
    ]
    assert plain[1].split("\t")[:7] == [
        draft.draft_id,
        "ready",
        "nightly-report",
        "",
        "mock",
        "3",
        "1",
    ]

    approved = cli("drafts", "approve", draft.draft_id, "--yes", "-o", "json")
    assert approved.exit_code == 0, approved.output
    assert (parse(Draft, approved.stdout).status, parse(Draft, approved.stdout).version) == (
        "approved",
        1,
    )
    review = approved.stderr.splitlines()
    assert f"definition_hash {draft.definition_hash}" in review
    assert review[-5:] == [*DAG, "approved: nightly-report version 1"]
    version = parse(
        Version, cli("workflows", "show", "nightly-report", "--version", "1", "-o", "json").stdout
    )
    assert (version.definition, version.definition_hash) == (
        draft.definition,
        draft.definition_hash,
    )

    again = cli("drafts", "approve", draft.draft_id, "--yes")  # returned as it is
    assert again.exit_code == 0, again.output
    assert "already approved: nightly-report version 1" in again.stderr
    workflow = parse(Workflow, cli("workflows", "show", "nightly-report", "-o", "json").stdout)
    assert workflow.latest_version == 1  # no second version
    refused = cli("drafts", "reject", draft.draft_id)
    assert refused.exit_code == ExitCode.REJECTED
    assert "is approved (409 draft_not_ready)" in refused.stderr


def test_a_draft_without_wait_is_printed_generating(cli: Cli, tmp_path: Path) -> None:
    created = cli("drafts", "create", PROMPT, "--script", "-", "-o", "json", input=turns(NIGHTLY))
    assert created.exit_code == 0, created.output
    draft: Draft = parse(Draft, created.stdout)
    assert (draft.status, draft.prompt, draft.model) == ("generating", PROMPT, "mock")
    assert f"created draft {draft.draft_id} (generating)" in created.stderr


def test_an_invalid_draft_shows_its_problems_and_cannot_be_approved(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    draft = ready_draft(cli, tmp_path, "no", {"id": "x"}, SELF_LOOP, [1])
    assert (draft.status, draft.definition, len({p.answer for p in draft.problems})) == (
        "invalid",
        None,
        4,
    )
    shown = cli("drafts", "show", draft.draft_id).stdout.splitlines()
    assert f"problems ({len(draft.problems)})" in shown
    assert "definition" not in shown
    assert DAG[0] not in shown
    # Nothing to confirm: no prompt, and the server refuses.
    refused = cli("drafts", "approve", draft.draft_id)
    assert refused.exit_code == ExitCode.REJECTED
    assert "is invalid (409 draft_not_ready)" in refused.stderr
    rejected = cli("drafts", "reject", draft.draft_id, "-o", "json")
    assert parse(Draft, rejected.stdout).status == "rejected"
    assert f"rejected draft {draft.draft_id}" in rejected.stderr
    assert live_api.viewer.get(f"{V1}/workflows/x").status_code == 404


def test_a_draft_that_changed_since_it_was_shown_is_not_approved(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    draft = ready_draft(cli, tmp_path, NIGHTLY)
    stale = "sha256:" + "1" * 64
    path = f"{V1}/drafts/{draft.draft_id}"
    result = altered(cli, live_api, path, "definition_hash", stale)(
        "drafts", "approve", draft.draft_id, "--yes"
    )
    assert result.exit_code == ExitCode.REJECTED
    assert f"definition_hash {stale}" in result.stderr
    assert "(409 draft_changed)" in result.stderr
    assert "nothing was created: the draft is not what was shown above" in result.stderr
    assert result.stdout == ""
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").status_code == 404
    still = live_api.viewer.get(path).json()
    assert still["status"] == "ready"


def test_without_a_terminal_a_draft_approval_needs_yes(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    draft = ready_draft(cli, tmp_path, NIGHTLY)
    result = cli("drafts", "approve", draft.draft_id, input="y\n")
    assert result.exit_code == ExitCode.USAGE
    assert "nobody can confirm" in result.stderr
    assert result.stderr.splitlines()[-5:-1] == DAG  # shown all the same
    assert live_api.viewer.get(f"{V1}/workflows/nightly-report").status_code == 404


@pytest.mark.parametrize(
    ("args", "stdin", "code", "message"),
    [
        (("create", "p", "--script", "{missing}"), None, ExitCode.USAGE, "cannot read"),
        (("create", "p", "--script", "{directory}"), None, ExitCode.USAGE, "cannot read"),
        (("create", "p", "--script", "-"), "{nope", ExitCode.USAGE, "not valid JSON"),
        (("create", "p", "--script", "-"), '{"content": "x"}', ExitCode.USAGE, "JSON array"),
        (("create", "p", "--script", "-"), "[1]", ExitCode.USAGE, "JSON array"),
        (("create", "p", "--script", "-"), '[{"content": 1}]', ExitCode.REJECTED, "/script/0"),
        (
            ("create", "p", "--model", "openai:x", "--script", "-"),
            '[{"content": "x"}]',
            ExitCode.REJECTED,
            "only the mock model follows a script",
        ),
        (("create", ""), None, ExitCode.REJECTED, "/prompt"),
        (("create", "p", "--workflow-id", "Not An Id"), None, ExitCode.REJECTED, "/workflow_id"),
        (("create", "p", "--timeout", "-1", "--wait"), None, ExitCode.USAGE, "--timeout"),
        (("show", MISSING), None, ExitCode.REJECTED, "404 not_found"),
        (("approve", "../drafts", "--yes"), None, ExitCode.REJECTED, "404 not_found"),
        (("reject", MISSING), None, ExitCode.REJECTED, "404 not_found"),
        (("list", "--limit", "zero"), None, ExitCode.USAGE, "--limit"),
    ],
    ids=[
        "missing-script",
        "script-is-a-directory",
        "script-not-json",
        "script-not-an-array",
        "turn-not-an-object",
        "turn-content-not-text",
        "script-for-another-model",
        "empty-prompt",
        "bad-workflow-id",
        "negative-timeout",
        "unknown-draft",
        "path-in-id",
        "reject-unknown",
        "word-limit",
    ],
)
def test_hostile_draft_arguments_create_nothing(
    cli: Cli,
    tmp_path: Path,
    live_api: LiveApi,
    args: tuple[str, ...],
    stdin: str | None,
    code: int,
    message: str,
) -> None:
    names = {"{missing}": str(tmp_path / "nope.json"), "{directory}": str(tmp_path)}
    result = cli("drafts", *(names.get(a, a) for a in args), input=stdin)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert result.stdout == ""
    assert live_api.viewer.get(f"{V1}/drafts").json()["items"] == []


def test_a_draft_wait_that_times_out_exits_12() -> None:
    draft = Draft.model_validate(
        {
            "draft_id": "d-1",
            "status": "generating",
            "prompt": "p",
            "model": "mock",
            "workflow_id": None,
            "definition": None,
            "definition_hash": None,
            "problems": [],
            "usage": {"model_calls": 0, "tool_calls": 0, "input_tokens": 0, "output_tokens": 0},
            "created_by": "operator:x",
            "created_at": "2025-01-01T00:00:00Z",
            "updated_at": "2025-01-01T00:00:00Z",
            "version": None,
        }
    )
    timed_out = DraftWaitTimeout("draft d-1 is still generating after 1s", draft=draft)
    assert exit_code_for_error(timed_out) is ExitCode.WAIT_TIMEOUT


# -- at a terminal -----------------------------------------------------------------------------


def at_terminal(
    live_api: LiveApi, tmp_path: Path, *args: str, answer: str
) -> subprocess.CompletedProcess[str]:
    """``workload ARGS`` with a pseudo-terminal as standard input, ``answer`` typed into it."""
    workload = Path(sys.executable).parent / "workload"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKLOAD_")}
    env.update(
        {
            "WORKLOAD_URL": live_api.base_url,
            "WORKLOAD_TOKEN": OPERATOR_TOKEN,
            "WORKLOAD_DATA_DIR": str(tmp_path),
            "NO_COLOR": "1",
        }
    )
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode())  # waits in the terminal until the command reads
        return subprocess.run(
            [str(workload), *args],
            stdin=terminal,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)


@pytest.mark.real_http_only
def test_a_person_at_a_terminal_confirms_or_declines(
    cli: Cli, tmp_path: Path, live_api: LiveApi
) -> None:
    approval = pending_approval(cli, tmp_path, live_api)

    declined = at_terminal(
        live_api, tmp_path, "approvals", "approve", approval.approval_id, answer="n\n"
    )
    assert declined.returncode == ExitCode.DECLINED, declined.stderr
    assert "Approve this call of deploy? [y/N] declined: nothing was sent" in declined.stderr
    assert f"arguments  {approval.arguments_digest}" in declined.stderr
    assert declined.stdout == ""
    assert current(live_api, approval).status == "pending"

    ended = at_terminal(
        live_api, tmp_path, "approvals", "reject", approval.approval_id, answer="\x04"
    )
    assert ended.returncode == ExitCode.DECLINED, ended.stderr  # Ctrl-D: no answer is no
    assert current(live_api, approval).status == "pending"

    confirmed = at_terminal(
        live_api, tmp_path, "approvals", "approve", approval.approval_id, "-o", "json", answer="y\n"
    )
    assert confirmed.returncode == 0, confirmed.stderr
    assert parse(Approval, confirmed.stdout).status == "approved"
    assert current(live_api, approval).status == "approved"
    assert live_api.wait_for_run(approval.run_id)["status"] == "succeeded"

    draft = ready_draft(cli, tmp_path, NIGHTLY)
    approved = at_terminal(live_api, tmp_path, "drafts", "approve", draft.draft_id, answer="yes\n")
    assert approved.returncode == 0, approved.stderr
    assert "Make this definition a version of workflow nightly-report? [y/N]" in approved.stderr
    assert "approved: nightly-report version 1" in approved.stderr

"""No terminal control a worker sends reaches the terminal (issue 33, finding T1; ADR 0023).

A worker reports an attempt's error; ``workload runs tasks`` and ``runs attempts`` used to
write its code and message as they came, so ESC sequences (OSC 52 sets the clipboard, OSC 8
hides a link), C1 controls and bidirectional overrides acted on the reader's terminal. The
message reaches the CLI through the real API (a message is free text); a code can no longer be
reported with controls (tests/e2e/test_worker_input.py), so one stored before that rule is
played by a transport that rewrites the API's answers.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.cli.conftest import Cli
from tests.e2e.test_workers import claim_one, create, remote, report, start
from tests.plugins.live_api import LiveApi

MESSAGE = (
    "copy \x1b]52;c;ZWNobyBwd25lZA==\x07 link \x1b]8;;https://evil.example\x1b\\here\x1b]8;;\x1b\\"
    " red \x1b[31m c1 \x9b2J bidi \u202eexe.txt\u202c back\rover bell\x07"
)
CODE = "Boom\x1b[2J\x1b]52;c;aGk=\x07\u2067"
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class HostileCodes(httpx.BaseTransport):
    """The API's answers, with each task's and attempt's error code replaced by :data:`CODE`."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._inner.handle_request(request)
        response.read()
        if not request.url.path.endswith(("/tasks", "/attempts")):
            return response
        body = response.json()
        for item in body["items"]:
            if item["error"] is not None:
                item["error"]["code"] = CODE
        return httpx.Response(response.status_code, json=body, request=request)


@pytest.fixture
def failed_run(live_api: LiveApi) -> str:
    """A run whose remote task failed with :data:`MESSAGE` (code ``Boom``, not retried)."""
    create(live_api, {"id": "hostile", "tasks": [remote()]})
    run_id = start(live_api, "hostile")
    item = claim_one(live_api)
    error = {"code": "Boom", "message": MESSAGE, "retryable": False}
    assert report(live_api, item, "fail", {"error": error}).status_code == 200
    live_api.wait_for_run(run_id)
    return run_id


COMMANDS = [pytest.param(("tasks",), id="tasks"), pytest.param(("attempts",), id="attempts")]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("fmt", ["plain", "table"])
def test_error_codes_and_messages_are_escaped(
    cli: Cli, live_api: LiveApi, failed_run: str, command: tuple[str, ...], fmt: str
) -> None:
    hostile = Cli(cli.env, HostileCodes(live_api.transport or httpx.HTTPTransport()))
    args = ["runs", *command, failed_run] + (["r"] if command == ("attempts",) else [])
    result = hostile(*args, "-o", fmt, env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    assert CONTROLS.findall(result.stdout) == []
    for shown in ("\\x1b]52;c;ZWNobyBwd25lZA==\\x07", "\\x1b]8;;https://evil.example", "\\x9b2J"):
        assert shown in result.stdout
    assert "\\u202eexe.txt\\u202c" in result.stdout
    assert "Boom\\x1b[2J\\x1b]52;c;aGk=\\x07\\u2067" in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_json_output_escapes_controls_and_keeps_the_values(
    cli: Cli, live_api: LiveApi, failed_run: str, command: tuple[str, ...]
) -> None:
    hostile = Cli(cli.env, HostileCodes(live_api.transport or httpx.HTTPTransport()))
    args = ["runs", *command, failed_run] + (["r"] if command == ("attempts",) else [])
    result = hostile(*args, "-o", "json")
    assert result.exit_code == 0, result.output
    assert CONTROLS.findall(result.stdout.replace("\n", "")) == []
    items: list[dict[str, Any]] = json.loads(result.stdout)
    assert [i["error"] for i in items] == [{"code": CODE, "message": MESSAGE, "retryable": False}]

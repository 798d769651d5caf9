"""Signing in to the console over httpx, reading what its pages carry, and what they are about:
workflows, an agent whose tool needs approval, drafts (and a gate to hold a model's answer)."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import httpx

from tests.plugins.live_api import LiveApi
from tests.waiting import wait_until
from workload_domain.agent.llm import Model, ModelRequest, ModelResponse
from workload_domain.jsonvalues import JsonObject
from workload_engine.model_router import ModelRouter

V1 = "/api/v1"
_keys = itertools.count()
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def idem() -> dict[str, str]:
    return {"Idempotency-Key": f"console-{next(_keys)}"}


def csrf_of(html: str) -> str:
    """The CSRF token of the first form of a page."""
    found = _CSRF.search(html)
    assert found is not None, "the page has no CSRF token"
    return found[1]


def assert_safe_page(answer: httpx.Response) -> str:
    """Check a console page: HTML, strict CSP, nosniff, not cached, nothing inline or foreign."""
    csp = answer.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"].startswith("text/html")
    html = answer.text
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == [], "an inline script"
    assert re.findall(r"\son[a-z]+\s*=", html) == [], "an inline event handler"
    assert re.findall(r"\sstyle\s*=", html) == [], "an inline style"
    assert re.findall(r"(?:src|href)=\"(?:https?:)?//", html) == [], "something from elsewhere"
    return html


def post_forms(html: str) -> list[str]:
    """Where a page's POST forms go."""
    return re.findall(r'<form method="post" action="([^"]+)"', html)


def form_field(html: str, name: str) -> str:
    """The value of a page's (first) hidden field ``name``."""
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, f"the page has no field {name}"
    return found[1]


def sign_in(api: LiveApi, token: str) -> httpx.Client:
    """A browser-like client (a cookie jar, no Authorization header) signed in with ``token``."""
    client = api.client(None)
    form = client.get("/ui/login")
    assert form.status_code == 200, form.text
    answer = client.post(
        "/ui/login", data={"csrf": csrf_of(form.text), "token": token, "next": "/ui/runs"}
    )
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/ui/runs"
    return client


def create(api: LiveApi, definition: dict[str, Any]) -> None:
    response = api.operator.post(f"{V1}/workflows", json=definition, headers=idem())
    assert response.status_code == 201, response.text


def start(api: LiveApi, workflow_id: str, version: int = 1) -> str:
    response = api.operator.post(
        f"{V1}/workflows/{workflow_id}/versions/{version}/runs", headers=idem()
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


SLEEPY: dict[str, Any] = {
    "id": "sleepy",
    "description": "one long task",
    "tasks": [{"key": "nap", "action": "mock", "input": {"sleep_ms": 600_000}}],
}
QUICK: dict[str, Any] = {"id": "quick", "tasks": [{"key": "a", "action": "mock"}]}


class GatedModels(ModelRouter):
    """The service's models, except that each model call first waits for ``gate`` to open.

    Open by default; a test closes it to hold a draft (or an agent) ``generating`` while it
    looks, then opens it.
    """

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate

    def model(self, name: str, *, script: Sequence[JsonObject] | None = None) -> Model:
        return _GatedModel(super().model(name, script=script), self.gate)


class _GatedModel:
    def __init__(self, inner: Model, gate: threading.Event) -> None:
        self._inner = inner
        self._gate = gate

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if not self._gate.is_set():
            # Abandoned (not waited for) if the service stops first; the fixture opens it after.
            await anyio.to_thread.run_sync(self._gate.wait, abandon_on_cancel=True)
        return await self._inner.complete(request)


DEPLOY_ARGUMENTS: dict[str, Any] = {"output": {"env": "prod", "services": ["web", "api"]}}


def deployer(workflow_id: str = "deployer", *calls: dict[str, Any]) -> dict[str, Any]:
    """An agent (mock model) calling ``deploy`` — an in-process tool that needs approval —
    once per item of ``calls`` (its arguments), then answering with what it was told."""
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "deploy", "arguments": arguments}]}
        for arguments in calls or (DEPLOY_ARGUMENTS,)
    ]
    script.append({"content": "done"})
    tool = {
        "name": "deploy",
        "action": "mock",
        "description": "deploy the site",
        "requires_approval": True,
        "parameters": {"type": "object"},
    }
    spec = {"model": "mock", "prompt": "deploy the site", "tools": [tool], "script": script}
    return {"id": workflow_id, "tasks": [{"key": "agent", "action": "agent", "input": spec}]}


def pending_approval(api: LiveApi, run_id: str) -> dict[str, Any]:
    """The run's pending approval, once there is one."""

    def found() -> dict[str, Any] | None:
        page = api.viewer.get(f"{V1}/approvals", params={"status": "pending"}).json()
        mine = [a for a in page["items"] if a["run_id"] == run_id]
        return mine[0] if mine else None

    return wait_until(found, message=f"run {run_id} asks for no approval")


def steps(api: LiveApi, run_id: str, task_key: str = "agent") -> list[dict[str, Any]]:
    """Every step of an agent task (its first 200)."""
    answer = api.viewer.get(f"{V1}/runs/{run_id}/tasks/{task_key}/steps", params={"limit": 200})
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["items"]
    return found


NIGHTLY: dict[str, Any] = {
    "id": "nightly-report",
    "description": "fetch then summarize",
    "tasks": [
        {"key": "fetch", "action": "mock", "input": {"output": {"rows": 3}}},
        {"key": "summarize", "action": "mock", "depends_on": ["fetch"]},
    ],
}
NIGHTLY_V2: dict[str, Any] = {
    **NIGHTLY,
    "tasks": [*NIGHTLY["tasks"], {"key": "mail", "action": "mock", "depends_on": ["summarize"]}],
}
SELF_LOOP: dict[str, Any] = {
    "id": "nightly-report",
    "tasks": [{"key": "a", "action": "mock", "depends_on": ["a"]}],
}


def script(*definitions: Any) -> list[dict[str, str]]:
    """A mock model's answers to a draft: each definition as JSON."""
    return [{"content": json.dumps(d)} for d in definitions]


def create_draft(api: LiveApi, answers: list[dict[str, str]], **fields: Any) -> str:
    """Ask for a draft over the API (the mock model answers ``answers``); its id."""
    body = {"prompt": "every night, fetch the rows and summarize them", "script": answers}
    response = api.operator.post(f"{V1}/drafts", json=body | fields, headers=idem())
    assert response.status_code == 202, response.text
    draft_id: str = response.json()["draft_id"]
    return draft_id


def generated(api: LiveApi, draft_id: str) -> dict[str, Any]:
    """The draft once its generation ended."""

    def done() -> dict[str, Any] | None:
        draft: dict[str, Any] = api.viewer.get(f"{V1}/drafts/{draft_id}").json()
        return draft if draft["status"] != "generating" else None

    return wait_until(done, message=f"draft {draft_id} is still generating")

"""Signing in to the console over httpx, and reading what its pages carry."""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx

from tests.plugins.live_api import LiveApi

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

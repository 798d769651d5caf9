"""``Worker.configure(operator_token=...)``: the token ``apply_on_start`` applies with (SPEC §17).

The constructor takes ``operator_token``; a worker configured later (as ``workload worker``
configures the one a module defines) gets the same shortcut. Over real HTTP, so the worker makes
its own operator client from the URL and the token, as it does in production.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from tests.plugins.live_api import OPERATOR_TOKEN, WORKER_TOKEN, LiveApi
from tests.waiting import wait_until
from workload_worker import Context, Worker, Workflow

pytestmark = pytest.mark.real_http_only


def _pipeline() -> Workflow:
    workflow = Workflow("configured")
    workflow.task("only", "fetch")
    return workflow


def _serve_until(worker: Worker, done: Callable[[], bool], message: str) -> None:
    @worker.action("fetch")
    async def fetch(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {}

    thread = threading.Thread(target=worker.run, name="configured-worker")
    thread.start()
    try:
        wait_until(lambda: done() or None, message=message)
    finally:
        worker.stop()
        thread.join(15)
        assert not thread.is_alive()


def test_an_operator_token_given_by_configure_applies_the_workflows(live_api: LiveApi) -> None:
    worker = Worker(url=live_api.base_url, workflows=[_pipeline()], apply_on_start=True)
    worker.configure(token=WORKER_TOKEN, operator_token=OPERATOR_TOKEN)

    def applied() -> bool:
        return live_api.viewer.get("/api/v1/workflows/configured").status_code == 200

    _serve_until(worker, applied, "the workflow was not applied")
    versions = live_api.viewer.get("/api/v1/workflows/configured/versions").json()["items"]
    assert [v["version"] for v in versions] == [1]


def test_without_it_the_worker_token_writes_nothing(
    live_api: LiveApi, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("WORKLOAD_TOKEN", raising=False)
    worker = Worker(url=live_api.base_url, workflows=[_pipeline()], apply_on_start=True)
    worker.configure(token=WORKER_TOKEN, operator_token=None)  # None keeps what there was
    with caplog.at_level(logging.WARNING, logger="workload.worker"):
        _serve_until(
            worker,
            lambda: "apply_on_start: no operator token" in caplog.text,
            "the worker did not say it applied nothing",
        )
    assert live_api.viewer.get("/api/v1/workflows/configured").status_code == 404

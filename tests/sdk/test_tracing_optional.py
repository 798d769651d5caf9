"""Trace context is optional in the SDK: without OpenTelemetry's API nothing changes (SPEC §12).

Runs in the SDK's own session too (httpx + pydantic only). OpenTelemetry is hidden from a
subprocess, whatever the environment holds; the SDK must neither import it nor fail.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workload_sdk._tracing import route_of

_PROGRAM = """
import json, sys
sys.modules["opentelemetry"] = None  # importing it now fails, as if it were not installed
import httpx
from workload_sdk import Client

seen = []

def handler(request):
    seen.append(dict(request.headers))
    body = {"items": [], "next_cursor": None}
    return httpx.Response(200, json=body, headers={"x-request-id": "r1"})

with Client(base_url="http://api.test", token="t", transport=httpx.MockTransport(handler)) as c:
    list(c.workflows.list())
print(json.dumps({"headers": seen, "loaded": "opentelemetry" in sys.modules and
                  sys.modules["opentelemetry"] is not None}))
"""


def test_without_opentelemetry_requests_carry_no_trace_context() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout)
    (headers,) = result["headers"]
    assert "traceparent" not in headers
    assert headers["authorization"] == "Bearer t"
    assert result["loaded"] is False


def test_importing_the_sdk_does_not_import_opentelemetry() -> None:
    code = "import sys, workload_sdk; print('opentelemetry' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/api/v1/workflows", "/api/v1/workflows"),
        ("/api/v1/workflows/wf", "/api/v1/workflows/{workflow_id}"),
        (
            "/api/v1/workflows/wf/versions/3/runs",
            "/api/v1/workflows/{workflow_id}/versions/{version}/runs",
        ),
        ("/api/v1/runs/abc/tasks/k/attempts", "/api/v1/runs/{run_id}/tasks/{task_key}/attempts"),
        ("/api/v1/runs/abc/cancel", "/api/v1/runs/{run_id}/cancel"),
        ("/api/v1/workers/w-1/claim", "/api/v1/workers/{worker_id}/claim"),
        ("/api/v1/attempts/a1/heartbeat", "/api/v1/attempts/{attempt_id}/heartbeat"),
        ("/api/v1/status", "/api/v1/status"),
        ("/livez", "/livez"),
    ],
    ids=[
        "workflows",
        "workflow",
        "runs",
        "attempts",
        "cancel",
        "claim",
        "heartbeat",
        "status",
        "livez",
    ],
)
def test_span_names_use_route_templates(path: str, route: str) -> None:
    assert route_of(path) == route

"""An unsampled request records no span and builds no attribute (SPEC §12, ADR 0031).

The service runs with the sampler SPEC §12 recommends, ``parentbased_traceidratio``: at ratio 0
a request, the run it creates, its local and remote attempts and the worker's calls export no
span at all, and not one attribute dictionary is built for them; at ratio 1 they are all there.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBasedTraceIdRatio

from tests.plugins.live_api import WORKER_TOKEN, LiveApi
from workload_api.telemetry import _http, _service
from workload_worker import Context, Worker

V1 = "/api/v1"
_keys = itertools.count()
BUILDERS = (
    (_service, "run_attributes"),
    (_service, "attempt_attributes"),
    (_http, "_request_attributes"),
)


@pytest.fixture(params=[0.0, 1.0], ids=["ratio-0", "ratio-1"])
def ratio(request: pytest.FixtureRequest) -> float:
    value: float = request.param
    return value


@pytest.fixture
def tracer_provider(ratio: float) -> Iterator[TracerProvider]:
    provider = TracerProvider(sampler=ParentBasedTraceIdRatio(ratio))
    yield provider
    provider.shutdown()


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many times each attribute builder of the service's spans was called."""
    counts = dict.fromkeys((name for _, name in BUILDERS), 0)
    for module, name in BUILDERS:
        original = getattr(module, name)

        def counting(*args: Any, _name: str = name, _original: Any = original) -> Any:
            counts[_name] += 1
            return _original(*args)

        monkeypatch.setattr(module, name, counting)
    return counts


def _run_a_local_and_a_remote_task(api: LiveApi) -> None:
    worker = Worker(client=api.async_sdk(WORKER_TOKEN), worker_id="w-sampled", wait_seconds=1)

    @worker.action("remote")
    async def remote(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return {"done": True}

    thread = threading.Thread(target=worker.run, name="sampled-worker")
    thread.start()
    try:
        created = api.operator.post(
            f"{V1}/workflows",
            json={
                "id": "sampled",
                "tasks": [
                    {"key": "local", "action": "mock"},
                    {"key": "far", "action": "remote", "depends_on": ["local"]},
                ],
            },
            headers={"Idempotency-Key": f"w-{next(_keys)}"},
        )
        assert created.status_code == 201, created.text
        started = api.operator.post(
            f"{V1}/workflows/sampled/versions/1/runs",
            headers={"Idempotency-Key": f"r-{next(_keys)}"},
        )
        assert started.status_code == 202, started.text
        assert api.wait_for_run(started.json()["run_id"])["status"] == "succeeded"
    finally:
        worker.stop()
        thread.join(15)
        assert not thread.is_alive()


def test_an_unsampled_request_records_no_span_and_builds_no_attribute(
    traced_api: LiveApi,
    spans: InMemorySpanExporter,
    tracer_provider: TracerProvider,
    built: dict[str, int],
    ratio: float,
) -> None:
    _run_a_local_and_a_remote_task(traced_api)
    tracer_provider.force_flush()
    names = {span.name for span in spans.get_finished_spans()}
    if ratio == 0:
        assert names == set(), names
        assert built == dict.fromkeys(built, 0)
    else:
        expected = {
            "POST /api/v1/workflows/{workflow_id}/versions/{version}/runs",
            "run sampled",
            "attempt local",
            "attempt far",
        }
        assert expected <= names, names
        assert all(count > 0 for count in built.values()), built

"""What ``workload serve`` imports before it is ready (SPEC §15: ready after a restart < 1 s).

The ``openai`` package (a third of a second), Jinja2 and the console's templates, and the
OpenTelemetry SDK are imported on first use: the OpenAI-compatible adapter when an endpoint is
configured, the templates at the first console page, the SDK when tracing is on. Each case runs
in a fresh interpreter (this one has imported everything already), with no ``WORKLOAD_*`` or
``OTEL_*`` variable but those it sets. The CLI's side (``workload serve``'s own modules) is
``tests/cli/test_startup_imports.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

DEFERRED = (
    "openai",
    "workload_model_openai",
    "anthropic",
    "workload_model_anthropic",
    "jinja2",
    "opentelemetry.sdk",
)

_SERVE = """
import json, sys
import anyio, httpx
from workload_api.container import Container, use_memory_store
from workload_api.settings import Settings

DEFERRED = {deferred!r}

def loaded():
    return sorted(m for m in DEFERRED if m in sys.modules)

async def main():
    container = use_memory_store(Container(settings=Settings(operator_tokens="op-" + "x" * 32)))
    container.coordinator()  # the whole wiring: service, engine, models, app, console
    seen = {{"wired": loaded()}}
    transport = httpx.ASGITransport(app=container.app())
    async with container.service().running():
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            seen["readyz"] = (await client.get("/readyz")).status_code
            seen["ready"] = loaded()
            seen["ui_login"] = (await client.get("/ui/login")).status_code
            seen["after_ui"] = loaded()
    print(json.dumps(seen))

anyio.run(main)
"""


def _run(code: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("WORKLOAD_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_serve_is_ready_without_openai_the_templates_or_the_tracing_sdk() -> None:
    seen = _run(_SERVE.format(deferred=DEFERRED))
    assert seen["wired"] == [], seen
    assert seen["readyz"] == 200, seen
    assert seen["ready"] == [], seen
    # The first console page loads Jinja2 (and only that).
    assert seen["ui_login"] == 200, seen
    assert seen["after_ui"] == ["jinja2"], seen


def test_a_configured_endpoint_and_tracing_still_load_their_packages() -> None:
    code = """
import json, sys
import anyio
from workload_api.container import Container, use_memory_store
from workload_api.settings import Settings
from workload_model_openai import OpenAIModel

container = use_memory_store(Container(settings=Settings()))
container.coordinator()
router = container.models()
adapters = anyio.run(router.adapters, "openai")  # what an endpoint's first model call makes
print(json.dumps({
    "openai": type(adapters.model("openai:some-model")) is OpenAIModel,
    "tracing": container.telemetry().tracing,
    "sdk": "opentelemetry.sdk.trace" in sys.modules,
}))
"""
    seen = _run(
        code,
        WORKLOAD_OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        OTEL_TRACES_EXPORTER="console",
    )
    assert seen == {"openai": True, "tracing": True, "sdk": True}


def test_named_endpoints_load_their_adapter_at_their_first_model() -> None:
    endpoints = {
        "local": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "hosted": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "K"},
    }
    seen = _run(
        _SERVE.format(deferred=DEFERRED), WORKLOAD_MODEL_ENDPOINTS=json.dumps(endpoints), K="k-1"
    )
    assert seen["wired"] == [], seen
    assert seen["ready"] == [], seen

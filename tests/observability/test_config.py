"""The OpenTelemetry SDK configured by the standard ``OTEL_*`` variables (SPEC §12)."""

from __future__ import annotations

import pickle

import opentelemetry.sdk.resources as sdk_resources
import pytest
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from workload_api.telemetry import TracingConfigError, tracer_provider_from_env
from workload_api.telemetry._resource import HashedResource

OTLP = "OTLPSpanExporter"
CONSOLE = "ConsoleSpanExporter"


def _exporters(env: dict[str, str]) -> list[str] | None:
    provider = tracer_provider_from_env(env)
    if provider is None:
        return None
    try:
        processors = provider._active_span_processor._span_processors
        return [type(p.span_exporter).__name__ for p in processors]  # type: ignore[attr-defined]
    finally:
        provider.shutdown()


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"OTEL_TRACES_EXPORTER": "none"}, None),
        ({"OTEL_TRACES_EXPORTER": ""}, None),
        ({"OTEL_TRACES_EXPORTER": "console"}, [CONSOLE]),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, [OTLP]),
        ({"OTEL_TRACES_EXPORTER": "otlp, console"}, [OTLP, CONSOLE]),
        ({"OTEL_TRACES_EXPORTER": "OTLP,otlp"}, [OTLP]),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, None),
        (
            {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            [OTLP],
        ),
        ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, [CONSOLE]),
    ],
    ids=[
        "unset",
        "none",
        "empty",
        "console",
        "otlp",
        "both",
        "repeated",
        "sdk-disabled",
        "http-protobuf",
        "grpc-without-otlp",
    ],
)
def test_exporters_follow_the_environment(env: dict[str, str], expected: list[str] | None) -> None:
    assert _exporters(env) == expected


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_TRACES_EXPORTER": "otlp,jaeger"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
    ],
    ids=["zipkin", "jaeger", "otlp-grpc", "otlp-http-json"],
)
def test_what_cannot_be_done_is_refused(env: dict[str, str]) -> None:
    with pytest.raises(TracingConfigError):
        tracer_provider_from_env(env)


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({}, "workload"),
        ({"OTEL_SERVICE_NAME": "workload-eu"}, "workload-eu"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "service.name=cp,deployment.environment=prod"}, "cp"),
    ],
    ids=["default", "service-name", "resource-attributes"],
)
def test_the_service_name(env: dict[str, str], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The SDK's resource detector reads the process environment itself.
    for key in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    provider = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console", **env})
    assert provider is not None
    try:
        assert provider.resource.attributes["service.name"] == name
    finally:
        provider.shutdown()


def test_the_console_exporter_is_the_sdks() -> None:
    provider = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert provider is not None
    processors = provider._active_span_processor._span_processors
    assert isinstance(processors[0].span_exporter, ConsoleSpanExporter)  # type: ignore[attr-defined]
    provider.shutdown()


def test_the_resource_hashes_as_the_sdks_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The OTLP exporter hashes the resource per span: its hash is kept, equal to the SDK's."""
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod")
    provider = tracer_provider_from_env({"OTEL_TRACES_EXPORTER": "console"})
    assert provider is not None
    try:
        resource = provider.resource
        assert isinstance(resource, HashedResource)
        plain = sdk_resources.Resource(resource.attributes, resource.schema_url)
        assert resource == plain
        assert plain == resource
        expected, by_resource = hash(plain), {plain: "the same key"}
        assert resource.attributes["deployment.environment"] == "prod"

        def no_serialising(*args: object, **kwargs: object) -> str:
            raise AssertionError("the resource's attributes were serialised again")

        monkeypatch.setattr(sdk_resources, "dumps", no_serialising)
        assert hash(resource) == expected
        assert by_resource[resource] == "the same key"  # as the exporter groups spans
        monkeypatch.undo()
        copied = pickle.loads(pickle.dumps(resource))  # another process computes its own hash
        assert type(copied) is HashedResource
        assert copied == resource
        assert hash(copied) == expected
    finally:
        provider.shutdown()

"""The OpenTelemetry SDK configured by the standard ``OTEL_*`` variables (SPEC §12)."""

from __future__ import annotations

import pickle

import opentelemetry.sdk.resources as sdk_resources
import pytest
from opentelemetry.sdk.trace import sampling
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from workload_api.telemetry import TracingConfigError, tracer_provider_from_env, tracing_exporters
from workload_api.telemetry._config import _RATIO_SAMPLERS, _SAMPLERS
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


def test_the_samplers_are_the_sdks() -> None:
    """The names checked are exactly those the SDK builds a sampler from, ratios the same."""
    known = sampling._KNOWN_SAMPLERS
    assert sorted(_SAMPLERS) == sorted(known)
    ratios = [n for n, s in known.items() if isinstance(s, type)]  # built with the argument
    assert sorted(_RATIO_SAMPLERS) == sorted(ratios)


_SAMPLER = "OTEL_TRACES_SAMPLER"
_ARG = "OTEL_TRACES_SAMPLER_ARG"
_PB_RATIO = "parentbased_traceidratio"


def _sampler_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """The process environment holds the sampler settings of ``env``, and no other."""
    for key in (_SAMPLER, _ARG):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


_pb_ratio = sampling.ParentBasedTraceIdRatio


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({_SAMPLER: "bogus"}, _SAMPLER),
        ({_SAMPLER: "parentbased-traceidratio"}, _SAMPLER),
        ({_SAMPLER: "always_on "}, _SAMPLER),  # the SDK does not strip the name
        ({_SAMPLER: " traceidratio", _ARG: "0.1"}, _SAMPLER),
        ({_SAMPLER: "jaeger_remote"}, _SAMPLER),
        ({_SAMPLER: _PB_RATIO, _ARG: "abc"}, _ARG),
        ({_SAMPLER: _PB_RATIO, _ARG: "-0.1"}, _ARG),
        ({_SAMPLER: _PB_RATIO, _ARG: "1.5"}, _ARG),
        ({_SAMPLER: _PB_RATIO, _ARG: "nan"}, _ARG),
        ({_SAMPLER: _PB_RATIO, _ARG: "inf"}, _ARG),
        ({_SAMPLER: _PB_RATIO, _ARG: "0,1"}, _ARG),
        ({_SAMPLER: _PB_RATIO, _ARG: "10%"}, _ARG),
        ({_SAMPLER: "TraceIdRatio", _ARG: "-1"}, _ARG),
        ({_SAMPLER: "traceidratio", _ARG: "2"}, _ARG),
    ],
    ids=[
        "unknown",
        "hyphens",
        "trailing-space",
        "leading-space",
        "not-the-sdks",
        "arg-abc",
        "arg-negative",
        "arg-above-one",
        "arg-nan",
        "arg-inf",
        "arg-comma",
        "arg-percent",
        "traceidratio-negative",
        "traceidratio-two",
    ],
)
def test_a_sampler_the_sdk_would_replace_is_refused(
    env: dict[str, str],
    variable: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK would warn and sample every trace instead: refused before it is asked."""
    _sampler_env(monkeypatch, env)
    sampling._get_from_env_or_default()  # what the SDK would have done: fall back, and say so
    assert "sampler" in caplog.text.lower()
    secret = "Authorization=Bearer s3cr3t"
    traced = {"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_HEADERS": secret, **env}
    with pytest.raises(TracingConfigError) as refused:
        tracing_exporters(traced)  # what `workload serve` checks before it starts
    message = str(refused.value)
    assert message.startswith(f"{variable}:")
    assert repr(env[variable]) in message
    assert "s3cr3t" not in message
    with pytest.raises(TracingConfigError):
        tracer_provider_from_env(traced)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, sampling.DEFAULT_ON),
        ({_SAMPLER: ""}, sampling.DEFAULT_ON),
        ({_SAMPLER: "  "}, sampling.DEFAULT_ON),
        ({_SAMPLER: "always_on"}, sampling.ALWAYS_ON),
        ({_SAMPLER: "ALWAYS_OFF"}, sampling.ALWAYS_OFF),
        ({_SAMPLER: "parentbased_always_on"}, sampling.DEFAULT_ON),
        ({_SAMPLER: "ParentBased_Always_Off"}, sampling.DEFAULT_OFF),
        ({_SAMPLER: "always_on", _ARG: "abc"}, sampling.ALWAYS_ON),
        ({_SAMPLER: "traceidratio", _ARG: "0"}, sampling.TraceIdRatioBased(0.0)),
        ({_SAMPLER: _PB_RATIO, _ARG: "0"}, _pb_ratio(0.0)),
        ({_SAMPLER: _PB_RATIO, _ARG: "1"}, _pb_ratio(1.0)),
        ({_SAMPLER: _PB_RATIO, _ARG: "0.5"}, _pb_ratio(0.5)),
        ({_SAMPLER: _PB_RATIO, _ARG: " 0.1 "}, _pb_ratio(0.1)),
        ({_SAMPLER: _PB_RATIO, _ARG: "1e-2"}, _pb_ratio(0.01)),
        ({_SAMPLER: "Parentbased_TraceIdRatio", _ARG: ".25"}, _pb_ratio(0.25)),
        ({_SAMPLER: _PB_RATIO}, _pb_ratio(1.0)),
        ({_SAMPLER: _PB_RATIO, _ARG: ""}, _pb_ratio(1.0)),
        ({_SAMPLER: "traceidratio", _ARG: " "}, sampling.TraceIdRatioBased(1.0)),
    ],
    ids=[
        "unset",
        "empty",
        "blank",
        "always-on",
        "always-off-upper-case",
        "parentbased-always-on",
        "parentbased-always-off-mixed-case",
        "arg-ignored-without-ratio",
        "traceidratio-zero",
        "ratio-zero",
        "ratio-one",
        "ratio-half",
        "ratio-spaces",
        "ratio-exponent",
        "ratio-mixed-case",
        "ratio-arg-unset",
        "ratio-arg-empty",
        "traceidratio-arg-blank",
    ],
)
def test_a_sampler_the_sdk_honours_is_accepted_and_built(
    env: dict[str, str],
    expected: sampling.Sampler,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Accepted exactly as the SDK, which reads the process environment, builds it."""
    _sampler_env(monkeypatch, env)
    traced = {"OTEL_TRACES_EXPORTER": "console", **env}
    assert tracing_exporters(traced) == ["console"]
    provider = tracer_provider_from_env(traced)
    assert provider is not None
    try:
        assert type(provider.sampler) is type(expected)
        assert provider.sampler.get_description() == expected.get_description()
    finally:
        provider.shutdown()
    name, arg = env.get(_SAMPLER, "parentbased_always_on"), env.get(_ARG, "")
    if name.strip() and (name.lower() not in _RATIO_SAMPLERS or arg.strip()):
        # Honoured as given: the SDK did not fall back. (An empty or unset variable it takes
        # as the default, saying it could not use it: left as it was, and not refused.)
        assert "sampler" not in caplog.text.lower()


@pytest.mark.parametrize(
    "env",
    [
        {_SAMPLER: "bogus"},
        {"OTEL_TRACES_EXPORTER": "none", _SAMPLER: _PB_RATIO, _ARG: "abc"},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true", _SAMPLER: "bogus"},
    ],
    ids=["no-exporter", "exporter-none", "sdk-disabled"],
)
def test_the_sampler_is_not_read_when_tracing_is_off(env: dict[str, str]) -> None:
    """No sampler is built then, so none is refused."""
    assert tracing_exporters(env) == []
    assert tracer_provider_from_env(env) is None


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

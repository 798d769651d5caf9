"""The OpenTelemetry SDK, configured by the standard ``OTEL_*`` variables (SPEC §12).

Tracing is off unless ``OTEL_TRACES_EXPORTER`` names an exporter: ``otlp`` (HTTP/protobuf to
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, default
``http://localhost:4318``) and ``console`` (stdout) are supported, alone or together
(``otlp,console``); ``none`` or nothing means off, and so does ``OTEL_SDK_DISABLED=true``.
The SDK itself reads the rest: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the
service name defaults to ``workload``), ``OTEL_TRACES_SAMPLER[_ARG]``, ``OTEL_BSP_*`` (the
batch processor), ``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS``, ``…_TIMEOUT``, ``…_COMPRESSION``.
The SDK is imported only when tracing is on: a service that does not trace never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "TracingConfigError",
    "tracer_provider_from_env",
    "tracing_exporters",
]

DEFAULT_SERVICE_NAME = "workload"
_EXPORTERS = ("otlp", "console")
_OTLP_PROTOCOL = "http/protobuf"


class TracingConfigError(ValueError):
    """The ``OTEL_*`` variables ask for something this service cannot do."""


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter  # noqa: PLC0415

        return ConsoleSpanExporter()
    # Imported only when asked for: the exporter brings protobuf and requests.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )

    return OTLPSpanExporter()


def _resource(env: Mapping[str, str]) -> Resource:
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - only when tracing

    from workload_api.telemetry._resource import HashedResource  # noqa: PLC0415 - it imports the SDK

    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    # Resource.create merges the OTEL_* variables under the attributes given here, so the
    # default is given only when the environment names no service.
    created = Resource.create({} if named else {"service.name": DEFAULT_SERVICE_NAME})
    return HashedResource(created.attributes, created.schema_url)


def tracing_exporters(environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporters the ``OTEL_*`` variables ask for (empty: tracing is off); builds nothing.

    Raises:
        TracingConfigError: an exporter other than ``otlp``/``console``, or an OTLP protocol
            other than ``http/protobuf``.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")]
    names = [n for n in dict.fromkeys(names) if n and n != "none"]
    unknown = [n for n in names if n not in _EXPORTERS]
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER: unsupported exporter(s) {', '.join(unknown)} "
            f"(supported: {', '.join(_EXPORTERS)}, none)"
        )
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or _OTLP_PROTOCOL
    )
    if "otlp" in names and protocol.strip() != _OTLP_PROTOCOL:
        raise TracingConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: only {_OTLP_PROTOCOL} is supported, not {protocol!r}"
        )
    return names


def tracer_provider_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """A tracer provider as the ``OTEL_*`` variables ask, or None when tracing is off.

    Raises:
        TracingConfigError: see :func:`tracing_exporters`.
    """
    env = os.environ if environ is None else environ
    names = tracing_exporters(env)
    if not names:
        return None
    # Imported only now: the SDK (it brings psutil) would cost every start ≈ 40 ms.
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    from workload_api.telemetry._roots import DrawnIds  # noqa: PLC0415 - it imports the SDK

    provider = TracerProvider(resource=_resource(env), id_generator=DrawnIds())
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    return provider

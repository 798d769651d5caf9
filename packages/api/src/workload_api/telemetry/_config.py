"""The OpenTelemetry SDK, configured by the standard ``OTEL_*`` variables (SPEC §12).

Tracing is off unless ``OTEL_TRACES_EXPORTER`` names an exporter: ``otlp`` (HTTP/protobuf to
``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, default
``http://localhost:4318``) and ``console`` (stdout) are supported, alone or together
(``otlp,console``); ``none`` or nothing means off, and so does ``OTEL_SDK_DISABLED=true``.
The SDK itself reads the rest: ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (the
service name defaults to ``workload``), ``OTEL_TRACES_SAMPLER[_ARG]``, ``OTEL_BSP_*`` (the
batch processor), ``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS``, ``…_TIMEOUT``, ``…_COMPRESSION``.
The SDK is imported only when tracing is on: a service that does not trace never loads it.

The sampler is built by the SDK (``TracerProvider`` given none), which on a name it does not
know, or a ratio it cannot use, logs a warning and samples every trace; so with tracing on the
two variables are checked here first, as the SDK reads them: the name case-insensitively but
not stripped, the ratio with ``float`` (which strips) and in [0, 1]. Empty means unset (the
specification's rule; the SDK's outcome too: the default sampler, the default ratio 1.0).
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
_RATIO_SAMPLERS = ("traceidratio", "parentbased_traceidratio")
_SAMPLERS = (
    "always_on",
    "always_off",
    "parentbased_always_on",
    "parentbased_always_off",
    *_RATIO_SAMPLERS,
)
"""The samplers the SDK builds from ``OTEL_TRACES_SAMPLER`` (its ``_KNOWN_SAMPLERS``)."""


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


def _check_sampler(env: Mapping[str, str]) -> None:
    """Refuses an ``OTEL_TRACES_SAMPLER[_ARG]`` the SDK would replace by sampling everything."""
    name = env.get("OTEL_TRACES_SAMPLER", "")
    if not name.strip():  # unset: the SDK's default, parentbased_always_on
        return
    if name.lower() not in _SAMPLERS:  # the SDK lowercases the name; it does not strip it
        spaced = name.strip().lower() in _SAMPLERS
        raise TracingConfigError(
            f"OTEL_TRACES_SAMPLER: {name!r} has spaces around the name (the SDK keeps them)"
            if spaced
            else f"OTEL_TRACES_SAMPLER: unknown sampler {name!r} "
            f"(supported: {', '.join(_SAMPLERS)})"
        )
    arg = env.get("OTEL_TRACES_SAMPLER_ARG", "")
    if name.lower() not in _RATIO_SAMPLERS or not arg.strip():  # unset: the ratio is 1.0
        return
    try:
        ratio = float(arg)  # as the SDK converts it
    except ValueError:
        ratio = None
    if ratio is None or not 0.0 <= ratio <= 1.0:  # NaN is not in the range either
        raise TracingConfigError(
            f"OTEL_TRACES_SAMPLER_ARG: {name.lower()} takes a sampling ratio from 0 to 1, "
            f"not {arg!r}"
        )


def tracing_exporters(environ: Mapping[str, str] | None = None) -> list[str]:
    """The exporters the ``OTEL_*`` variables ask for (empty: tracing is off); builds nothing.

    With tracing on, the sampler they ask for is checked too; with it off, it is not read.

    Raises:
        TracingConfigError: an exporter other than ``otlp``/``console``, an OTLP protocol
            other than ``http/protobuf``, a sampler the SDK does not know, or a ratio
            sampler's argument that is not a number from 0 to 1.
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
    if names:
        _check_sampler(env)
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

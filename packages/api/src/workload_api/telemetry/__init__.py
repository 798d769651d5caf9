"""Observability (SPEC §12): Prometheus metrics, OpenTelemetry spans, and their wiring.

- :class:`ServiceTelemetry` implements the domain's telemetry port
  (:class:`workload_domain.telemetry.Telemetry`): counters from commits, spans of runs,
  attempts, statements, model and tool calls;
- :class:`Metrics` holds every metric in a registry of the service's own (``/metrics``);
- :class:`HttpTelemetry` is the ASGI middleware of HTTP spans and HTTP metrics;
- :func:`tracer_provider_from_env` configures the OpenTelemetry SDK from ``OTEL_*``;
- :mod:`workload_api.telemetry.genai` holds the GenAI span helpers (``chat {model}``,
  ``execute_tool {name}``) the agent runtime's hooks use.
"""

from workload_api.telemetry._config import (
    DEFAULT_SERVICE_NAME,
    TracingConfigError,
    tracer_provider_from_env,
    tracing_exporters,
)
from workload_api.telemetry._http import UNMATCHED_ROUTE, HttpTelemetry
from workload_api.telemetry._metrics import Metrics
from workload_api.telemetry._service import ServiceTelemetry, context_of, traceparent_of

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "UNMATCHED_ROUTE",
    "HttpTelemetry",
    "Metrics",
    "ServiceTelemetry",
    "TracingConfigError",
    "context_of",
    "traceparent_of",
    "tracer_provider_from_env",
    "tracing_exporters",
]

"""The service's OpenTelemetry resource, its hash computed once.

The OTLP exporter groups every span it encodes by its resource: a dictionary lookup, which
hashes the resource each time, and the SDK's ``Resource.__hash__`` serialises the attributes
to sorted JSON to do it — ≈ 14 % of encoding a span (cProfile of the SDK's ``encode_spans``).
A resource is immutable (its attributes are read-only), so its hash can be kept. The SDK
merges a plain ``Resource`` in after a fork (``TracerProvider._handle_fork``): a forked child
would hash as the SDK does, correct and as slow as before; the service does not fork. This
module imports the SDK: it is loaded only with tracing on.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Attributes, Resource

__all__ = ["HashedResource"]


class HashedResource(Resource):
    """The SDK's ``Resource``, equal and hashing as it does, the hash computed once."""

    def __init__(self, attributes: Attributes, schema_url: str | None = None) -> None:
        super().__init__(attributes, schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[HashedResource], tuple[dict[str, Any], str | None]]:
        # A string's hash differs between processes: a copy computes its own.
        return (HashedResource, (dict(self.attributes), self.schema_url))

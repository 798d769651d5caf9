"""The OpenAPI 3.1 document, generated from the operations table and the pydantic models."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from workload_api import schemas
from workload_api.operations import OPERATIONS, Operation
from workload_domain.definition import WorkflowDefinition

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_PROBLEM = {"$ref": "#/components/schemas/ProblemDetails"}
_IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": True,
    "description": "1-255 visible ASCII characters; the same key replays the first outcome",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
}
_REQUEST_ID_HEADER = {
    "description": "the request id (the client's X-Request-ID if valid, else generated)",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"},
}
_WWW_AUTHENTICATE = {
    "description": 'Bearer realm="workload" (plus error="invalid_token" for a wrong token)',
    "required": True,
    "schema": {"type": "string"},
}
_RETRY_AFTER = {
    "description": (
        "seconds to wait before trying again: the caller holds as many waiting claims or event"
        " streams as it may (too_many_requests, ADR 0025)"
    ),
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}
_LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "description": "resume after this event sequence (sent by EventSource on a reconnect)",
    "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
}
_EVENT_STREAM_DESCRIPTION = (
    "One server-sent event (the schema describes each event of the stream): an event of the run "
    "(`id:` its sequence, `data:` the event resource as JSON), in sequence order, each once; a "
    "`: keep-alive` comment every 15 s while nothing happens; once the run is terminal and every "
    'event was sent, `event: end` with data {"run_id", "status"}, and the stream closes.'
)
_SEQUENCE_ID = {"type": "string", "pattern": "^[0-9]{1,18}$"}


def _event_stream_schema(event_ref: str) -> dict[str, Any]:
    """Each event of a run's stream (OpenAPI 3.1: ``schema`` describes one event)."""

    def message(kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["event", "data"],
            "properties": {
                "event": {"const": kind},
                "id": _SEQUENCE_ID,
                "retry": {"type": "integer", "minimum": 0},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": data,
                },
            },
        }

    end = {
        "type": "object",
        "required": ["run_id", "status"],
        "properties": {
            "run_id": {"type": "string"},
            "status": {"type": "string", "enum": ["succeeded", "failed", "canceled"]},
        },
    }
    return {
        "description": _EVENT_STREAM_DESCRIPTION,
        "oneOf": [message("message", {"$ref": event_ref}), message("end", end)],
    }


_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": (
        'the ETag of GET run ("<revision>"), or a list of them, or "*": cancel only if the run'
        " is unchanged (at one of the listed revisions); weak tags never match"
    ),
    "schema": {"type": "string"},
}


def _components() -> dict[str, Any]:
    requests: list[type[BaseModel]] = [
        WorkflowDefinition,
        *(op.body for op in OPERATIONS if isinstance(op.body, type)),
    ]
    models: list[type[BaseModel]] = [
        schemas.ProblemDetails,
        schemas.Health,
        schemas.Ready,
        schemas.StartRunRequest,
        *{op.response for op in OPERATIONS},
    ]
    _, top = models_json_schema(
        [(m, "validation") for m in requests] + [(m, "serialization") for m in models],
        ref_template=_REF,
    )
    linked: dict[str, Any] = _link_definitions(dict(top.get("$defs", {})))
    # A new version's body may omit "id" (it defaults to the path's).
    version_body = dict(linked["WorkflowDefinition"])
    version_body["required"] = [f for f in version_body["required"] if f != "id"]
    version_body["title"] = "VersionDefinition"
    version_body["description"] = (
        "A workflow definition for a new version; id defaults to the path's workflow_id."
    )
    linked["VersionDefinition"] = version_body
    return linked


def _link_definitions(node: Any) -> Any:
    """Replace the definition placeholders with references to WorkflowDefinition."""
    if isinstance(node, dict):
        if node.get(schemas.DEFINITION_MARKER):
            return {"$ref": _REF.format(model="WorkflowDefinition")}
        return {k: _link_definitions(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_link_definitions(v) for v in node]
    return node


def _path_parameters(path: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]


def _operation(op: Operation, refs: dict[str, str]) -> dict[str, Any]:
    parameters = _path_parameters(op.path)
    parameters += [
        {
            "name": q.name,
            "in": "query",
            "required": False,
            "description": q.description,
            "schema": dict(q.schema),
        }
        for q in op.query
    ]
    if op.writes:
        parameters.append(_IDEMPOTENCY_KEY)
    elif op.optional_key:
        parameters.append({**_IDEMPOTENCY_KEY, "required": False})
    if op.operation_id == "cancelRun":
        parameters.append(_IF_MATCH)
    if op.stream:
        parameters.append(_LAST_EVENT_ID)
    success_headers: dict[str, Any] = {"X-Request-ID": _REQUEST_ID_HEADER}
    if op.etag:
        success_headers["ETag"] = {
            "description": 'the run\'s revision, "<revision>"; send it back in If-Match',
            "required": True,
            "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
        }
    if op.writes or op.optional_key:
        success_headers["Idempotent-Replayed"] = {
            "description": (
                "true: this is the stored answer of an earlier request with the same"
                " Idempotency-Key and the same request (nothing was written again)"
            ),
            "required": False,
            "schema": {"type": "string", "enum": ["true"]},
        }
    if op.operation_id == "startRun":
        success_headers["Location"] = {
            "description": "/api/v1/runs/{run_id}",
            "required": True,
            "schema": {"type": "string"},
        }
    content: dict[str, Any] = {"application/json": {"schema": {"$ref": refs[op.operation_id]}}}
    if op.stream:
        content = {"text/event-stream": {"schema": _event_stream_schema(refs[op.operation_id])}}
    responses: dict[str, Any] = {
        str(op.success): {
            "description": HTTPStatus(op.success).phrase,
            "headers": success_headers,
            "content": content,
        }
    }
    for status, meaning in op.also:
        responses[str(status)] = {
            "description": meaning,
            "headers": success_headers,
            "content": content,
        }
    if op.writes:
        responses.setdefault(str(op.success), {})
    for status in (*op.errors, 500):
        headers: dict[str, Any] = {"X-Request-ID": _REQUEST_ID_HEADER}
        if status == 401:
            headers["WWW-Authenticate"] = _WWW_AUTHENTICATE
        if status == 429:
            headers["Retry-After"] = _RETRY_AFTER
        responses[str(status)] = {
            "description": HTTPStatus(status).phrase,
            "headers": headers,
            "content": {"application/problem+json": {"schema": _PROBLEM}},
        }
    document: dict[str, Any] = {
        "operationId": op.operation_id,
        "summary": op.summary,
        "parameters": parameters,
        "responses": responses,
        "security": [{"bearer": []}],
    }
    if op.body == "definition":
        path_names_it = op.operation_id in ("createVersion", "applyWorkflow")  # id may be left out
        schema = "VersionDefinition" if path_names_it else "WorkflowDefinition"
        document["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _REF.format(model=schema)}}},
        }
    elif op.body == "start_run":
        document["requestBody"] = {
            "required": False,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/StartRunRequest"}}
            },
        }
    elif isinstance(op.body, type):
        document["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": _REF.format(model=op.body.__name__)}}
            },
        }
    return document


def _public(
    summary: str, operation_id: str, statuses: tuple[int, ...], schema: dict[str, Any]
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        "security": [],
        "responses": {
            str(s): {
                "description": HTTPStatus(s).phrase,
                "headers": {"X-Request-ID": _REQUEST_ID_HEADER},
                "content": {"application/json": {"schema": schema}},
            }
            for s in statuses
        },
    }


def _metrics() -> dict[str, Any]:
    """``GET /metrics``: Prometheus text, for a viewer (public with WORKLOAD_METRICS_PUBLIC)."""
    responses: dict[str, Any] = {
        "200": {
            "description": "every metric of SPEC §12, in the Prometheus text format",
            "headers": {"X-Request-ID": _REQUEST_ID_HEADER},
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    }
    for status in (400, 401, 403, 500, 503):
        headers: dict[str, Any] = {"X-Request-ID": _REQUEST_ID_HEADER}
        if status == 401:
            headers["WWW-Authenticate"] = _WWW_AUTHENTICATE
        responses[str(status)] = {
            "description": HTTPStatus(status).phrase,
            "headers": headers,
            "content": {"application/problem+json": {"schema": _PROBLEM}},
        }
    return {
        "operationId": "getMetrics",
        "summary": "Prometheus metrics (a viewer token, unless WORKLOAD_METRICS_PUBLIC=true)",
        "parameters": [],
        "responses": responses,
        "security": [{"bearer": []}],
    }


def openapi_document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document of the service."""
    components = _components()
    refs: dict[str, str] = {}
    for op in OPERATIONS:
        title = op.response.model_json_schema(mode="serialization")["title"]
        key = next(
            (k for k, v in components.items() if v.get("title") == title),
            op.response.__name__,
        )
        refs[op.operation_id] = _REF.format(model=key)
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, refs)
    health = {"$ref": "#/components/schemas/Health"}
    paths["/api/v1/openapi.json"] = {
        "get": _public("This OpenAPI document", "getOpenApi", (200,), {"type": "object"})
    }
    paths["/livez"] = {"get": _public("Liveness", "getLivez", (200,), health)}
    ready = {"$ref": "#/components/schemas/Ready"}
    paths["/readyz"] = {"get": _public("Readiness", "getReadyz", (200, 503), ready)}
    paths["/metrics"] = {"get": _metrics()}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Workload control plane API",
            "version": "1.0.0",
            "description": "Workflows as immutable versions, runs, tasks, attempts and events.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }

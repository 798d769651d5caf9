"""The OpenAPI document of SPEC §6: valid OpenAPI 3.1, in parity with the routes, not stale.

No database: the app comes from the composition root with the in-memory store, only to read
its route table (and to fetch the served document in-process). The expectations below are
written from SPEC §6, not from the operations table that generates the document, so the checks
are not circular.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
import schemathesis
from schemathesis.core.result import Err
from schemathesis.specs.openapi.definitions import OPENAPI_31_VALIDATOR
from starlette.applications import Starlette
from starlette.routing import Route

from workload_api.container import Container, use_memory_store
from workload_api.openapi import openapi_document
from workload_api.settings import Settings
from workload_domain.statuses import RunStatus

DOCUMENT_FILE = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGENERATE = (
    'uv run python -c "import json; from workload_api.openapi import openapi_document; '
    'print(json.dumps(openapi_document(), indent=2, sort_keys=True))" > docs/openapi.json'
)
PROBLEM_REF = "#/components/schemas/ProblemDetails"
PROBLEM_MEDIA_TYPE = "application/problem+json"

# -- SPEC §6, written down independently of the operations table ------------------------------

V = "/api/v1"
PUBLIC = None
VIEWER = "viewer"
OPERATOR = "operator"
WORKER = "worker"

# (method, path) -> (success statuses, role needed; None = anyone)
SPEC_OPERATIONS: dict[tuple[str, str], tuple[frozenset[int], str | None]] = {
    ("POST", f"{V}/workflows"): (frozenset({201}), OPERATOR),
    ("GET", f"{V}/workflows"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/workflows/{{workflow_id}}"): (frozenset({200}), VIEWER),
    # SPEC §6 (amended 2026-12-01): apply by content, 201 created or 200 unchanged.
    ("PUT", f"{V}/workflows/{{workflow_id}}"): (frozenset({200, 201}), OPERATOR),
    ("POST", f"{V}/workflows/{{workflow_id}}/versions"): (frozenset({201}), OPERATOR),
    ("GET", f"{V}/workflows/{{workflow_id}}/versions"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/workflows/{{workflow_id}}/versions/{{version}}"): (frozenset({200}), VIEWER),
    ("POST", f"{V}/workflows/{{workflow_id}}/versions/{{version}}/runs"): (
        frozenset({202}),
        OPERATOR,
    ),
    ("GET", f"{V}/runs"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/runs/{{run_id}}"): (frozenset({200}), VIEWER),
    ("POST", f"{V}/runs/{{run_id}}/cancel"): (frozenset({202, 200}), OPERATOR),
    ("GET", f"{V}/runs/{{run_id}}/tasks"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/runs/{{run_id}}/tasks/{{task_key}}"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/runs/{{run_id}}/tasks/{{task_key}}/attempts"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/runs/{{run_id}}/tasks/{{task_key}}/steps"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/approvals"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/approvals/{{approval_id}}"): (frozenset({200}), VIEWER),
    ("POST", f"{V}/approvals/{{approval_id}}/decision"): (frozenset({200}), OPERATOR),
    ("POST", f"{V}/drafts"): (frozenset({202}), OPERATOR),
    ("GET", f"{V}/drafts"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/drafts/{{draft_id}}"): (frozenset({200}), VIEWER),
    ("POST", f"{V}/drafts/{{draft_id}}/approve"): (frozenset({200}), OPERATOR),
    ("POST", f"{V}/drafts/{{draft_id}}/reject"): (frozenset({200}), OPERATOR),
    ("GET", f"{V}/runs/{{run_id}}/events"): (frozenset({200}), VIEWER),
    # SPEC §13: the live event stream (text/event-stream).
    ("GET", f"{V}/runs/{{run_id}}/events/stream"): (frozenset({200}), VIEWER),
    # SPEC §10: workers claim and report; viewers list workers and queues.
    ("POST", f"{V}/workers/{{worker_id}}/claim"): (frozenset({200}), WORKER),
    ("POST", f"{V}/attempts/{{attempt_id}}/heartbeat"): (frozenset({200}), WORKER),
    ("POST", f"{V}/attempts/{{attempt_id}}/complete"): (frozenset({200}), WORKER),
    ("POST", f"{V}/attempts/{{attempt_id}}/fail"): (frozenset({200}), WORKER),
    ("GET", f"{V}/workers"): (frozenset({200}), VIEWER),
    ("GET", f"{V}/queues"): (frozenset({200}), VIEWER),
    # SPEC §12: the service at a glance (workload status), and the Prometheus metrics.
    ("GET", f"{V}/status"): (frozenset({200}), VIEWER),
    # SPEC §16: the live replicas and their shards.
    ("GET", f"{V}/cluster"): (frozenset({200}), VIEWER),
    ("GET", "/metrics"): (frozenset({200}), VIEWER),  # public with WORKLOAD_METRICS_PUBLIC
    ("GET", f"{V}/openapi.json"): (frozenset({200}), PUBLIC),
    ("GET", "/livez"): (frozenset({200}), PUBLIC),
    ("GET", "/readyz"): (frozenset({200}), PUBLIC),  # 503 {"status": ...} when not ready
}

# Operations whose success body is a stream of server-sent events, not one JSON object.
SPEC_STREAMS = frozenset({("GET", f"{V}/runs/{{run_id}}/events/stream")})

WORKFLOW = ("workflow_id", "latest_version", "description", "created_at", "updated_at")
VERSION_SUMMARY = ("workflow_id", "version", "definition_hash", "task_count", "created_at")
VERSION = (*VERSION_SUMMARY, "definition")
RUN = (
    "run_id",
    "workflow_id",
    "version",
    "status",
    "revision",
    "input",
    "cancel_requested",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "task_counts",
    "usage",
    # SPEC §6 (amended 2026-12-01): the run's result.
    "output",
)
TASK_RUN = (
    "task_key",
    "status",
    "depends_on",
    "attempt_count",
    "max_attempts",
    "next_attempt_at",
    "started_at",
    "finished_at",
    "output",
    "error",
    "usage",
)
ATTEMPT = (
    "attempt",
    "status",
    "started_at",
    "finished_at",
    "output",
    "error",
    # SPEC §10
    "attempt_id",
    "queue",
    "worker_id",
    "claimed_at",
    "lease_expires_at",
    "progress",
    # SPEC §6, §16
    "executed_by",
)
CLAIM_ITEM = (
    "kind",
    "attempt_id",
    "lease_token",
    "lease_expires_at",
    "timeout_at",
    "heartbeat_timeout_seconds",
    "run_id",
    "workflow_id",
    "version",
    "task_key",
    "attempt",
    "queue",
    "action",
    "input",
    "run_input",
    "upstream",
    "traceparent",
)
WORKER_RESOURCE = (
    "worker_id",
    "queues",
    "actions",
    "first_seen_at",
    "last_seen_at",
    "in_flight",
    "status",
)
QUEUE = ("queue", "queued", "running", "oldest_queued_age_seconds")
STATUS = (
    "status",
    "role",
    "epoch",
    "runs_active",
    "workers_active",
    "approvals_pending",
    "queues",
)
CLUSTER = ("shards_total", "replicas")
EVENT = ("sequence", "type", "occurred_at", "task_key", "attempt", "data")
APPROVAL = (
    "approval_id",
    "run_id",
    "task_key",
    "tool",
    "tool_call_id",
    "arguments",
    "arguments_digest",
    "status",
    "requested_at",
    "expires_at",
    "decided_by",
    "decided_at",
    "comment",
)
DRAFT = (
    "draft_id",
    "status",
    "workflow_id",
    "definition",
    "definition_hash",
    "problems",
    "usage",
    "created_by",
    "created_at",
    "version",
)
STEP = (
    "sequence",
    "kind",
    "status",
    "request",
    "request_hash",
    "response",
    "usage",
    "tool_call_id",
    "started_at",
    "finished_at",
)
ERROR_OBJECT = ("code", "message", "retryable")
PROBLEM = ("type", "title", "status", "detail", "code", "request_id")

# (method, path) -> (fields of the resource, whether the response is a page of them)
SPEC_RESOURCES: dict[tuple[str, str], tuple[tuple[str, ...], bool]] = {
    ("POST", f"{V}/workflows"): (VERSION, False),
    ("GET", f"{V}/workflows"): (WORKFLOW, True),
    ("GET", f"{V}/workflows/{{workflow_id}}"): (WORKFLOW, False),
    ("PUT", f"{V}/workflows/{{workflow_id}}"): (VERSION, False),
    ("POST", f"{V}/workflows/{{workflow_id}}/versions"): (VERSION, False),
    ("GET", f"{V}/workflows/{{workflow_id}}/versions"): (VERSION_SUMMARY, True),
    ("GET", f"{V}/workflows/{{workflow_id}}/versions/{{version}}"): (VERSION, False),
    ("POST", f"{V}/workflows/{{workflow_id}}/versions/{{version}}/runs"): (RUN, False),
    ("GET", f"{V}/runs"): (RUN, True),
    ("GET", f"{V}/runs/{{run_id}}"): (RUN, False),
    ("POST", f"{V}/runs/{{run_id}}/cancel"): (RUN, False),
    ("GET", f"{V}/runs/{{run_id}}/tasks"): (TASK_RUN, True),
    ("GET", f"{V}/runs/{{run_id}}/tasks/{{task_key}}"): (TASK_RUN, False),
    ("GET", f"{V}/runs/{{run_id}}/tasks/{{task_key}}/attempts"): (ATTEMPT, True),
    ("GET", f"{V}/runs/{{run_id}}/tasks/{{task_key}}/steps"): (STEP, True),
    ("GET", f"{V}/approvals"): (APPROVAL, True),
    ("GET", f"{V}/approvals/{{approval_id}}"): (APPROVAL, False),
    ("POST", f"{V}/approvals/{{approval_id}}/decision"): (APPROVAL, False),
    ("POST", f"{V}/drafts"): (DRAFT, False),
    ("GET", f"{V}/drafts"): (DRAFT, True),
    ("GET", f"{V}/drafts/{{draft_id}}"): (DRAFT, False),
    ("POST", f"{V}/drafts/{{draft_id}}/approve"): (DRAFT, False),
    ("POST", f"{V}/drafts/{{draft_id}}/reject"): (DRAFT, False),
    ("GET", f"{V}/runs/{{run_id}}/events"): (EVENT, True),
    ("POST", f"{V}/attempts/{{attempt_id}}/complete"): (ATTEMPT, False),
    ("POST", f"{V}/attempts/{{attempt_id}}/fail"): (ATTEMPT, False),
    ("GET", f"{V}/workers"): (WORKER_RESOURCE, True),
    ("GET", f"{V}/status"): (STATUS, False),
    ("GET", f"{V}/cluster"): (CLUSTER, False),
}

MAX_PAGE_LIMIT = 200
DEFAULT_PAGE_LIMIT = 50

# JSON Schema 2020-12 keywords (all vocabularies) plus the OpenAPI 3.1 Schema Object additions.
SCHEMA_KEYWORDS = frozenset(
    {
        # core
        "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary",
        "$comment", "$defs",
        # applicator
        "prefixItems", "items", "contains", "additionalProperties", "properties",
        "patternProperties", "dependentSchemas", "propertyNames", "if", "then", "else", "allOf",
        "anyOf", "oneOf", "not",
        # unevaluated
        "unevaluatedItems", "unevaluatedProperties",
        # validation
        "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems",
        "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties", "required",
        "dependentRequired",
        # format, content, meta-data
        "format", "contentEncoding", "contentMediaType", "contentSchema", "title", "description",
        "default", "deprecated", "readOnly", "writeOnly", "examples",
        # OpenAPI 3.1 Schema Object
        "discriminator", "xml", "externalDocs", "example",
    }
)  # fmt: skip
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
SCHEMA_SINGLES = (
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")


# -- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi_document()


@pytest.fixture(scope="module")
def app() -> Starlette:
    app: Starlette = use_memory_store(Container(settings=Settings.model_construct())).app()
    return app


def _operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in {"get", "put", "post", "delete", "options", "head", "patch", "trace"}:
                yield method.upper(), path, operation


def _resolve(document: dict[str, Any], node: Any) -> Any:
    """Follow local ``$ref`` chains (``#/a/b``) to the node they name."""
    seen: set[str] = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert isinstance(ref, str), f"$ref is not a string: {ref!r}"
        assert ref.startswith("#/"), f"only local references are expected, got {ref!r}"
        assert ref not in seen, f"$ref cycle through {ref}"
        seen.add(ref)
        target: Any = document
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            assert isinstance(target, dict), f"{ref}: {part!r} is looked up in a non-object"
            assert part in target, f"{ref} does not resolve ({part!r} is missing)"
            target = target[part]
        node = target
    return node


def _refs(node: Any, where: str = "#") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield where, value
            else:
                yield from _refs(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _refs(value, f"{where}/{index}")


def _schema_objects(document: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every Schema Object of the document (components, parameters, bodies, responses)."""
    for name, schema in document["components"]["schemas"].items():
        yield f"#/components/schemas/{name}", schema
    for method, path, operation in _operations(document):
        where = f"{method} {path}"
        for parameter in operation.get("parameters", []):
            yield f"{where} parameter {parameter.get('name')}", parameter.get("schema", {})
        for media, content in operation.get("requestBody", {}).get("content", {}).items():
            yield f"{where} request body {media}", content.get("schema", {})
        for status, response in operation["responses"].items():
            for media, content in response.get("content", {}).items():
                yield f"{where} {status} {media}", content.get("schema", {})
            for header, spec in response.get("headers", {}).items():
                yield f"{where} {status} header {header}", spec.get("schema", {})


def _unknown_keywords(schema: Any, where: str) -> Iterator[str]:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        yield f"{where}: a schema must be an object or a boolean, got {schema!r}"
        return
    for key in schema:
        if key not in SCHEMA_KEYWORDS and not key.startswith("x-"):
            yield f"{where}: unknown JSON Schema keyword {key!r}"
    for key in SCHEMA_MAPS:
        for name, sub in schema.get(key, {}).items():
            yield from _unknown_keywords(sub, f"{where}/{key}/{name}")
    for key in SCHEMA_SINGLES:
        if key in schema:
            yield from _unknown_keywords(schema[key], f"{where}/{key}")
    for key in SCHEMA_LISTS:
        for index, sub in enumerate(schema.get(key, [])):
            yield from _unknown_keywords(sub, f"{where}/{key}/{index}")


def _validator(document: dict[str, Any], schema: dict[str, Any]) -> jsonschema_rs.Validator:
    """A JSON Schema 2020-12 validator for ``schema`` whose ``#/components/...`` refs resolve."""
    root = {"components": document["components"], **schema}
    return jsonschema_rs.Draft202012Validator(root)


def _success_statuses(operation: dict[str, Any]) -> set[int]:
    return {int(s) for s in operation["responses"] if s.isdigit() and 200 <= int(s) < 300}


def _expected_errors(method: str, path: str, role: str | None) -> set[int]:
    """The error statuses SPEC §6 says an operation can answer with."""
    if role is PUBLIC:
        return set()
    # Query/body validation, auth, the wrong role (a worker token on a read), internal,
    # unavailable.
    errors = {400, 401, 403, 500, 503}
    if method in ("POST", "PUT"):
        errors |= {409, 413, 415}  # idempotency_key_reused or lease_lost, body size and type
    # A worker's unknown attempt is 409 lease_lost unknown; an apply creates what is missing.
    if "{" in path and role != WORKER and method != "PUT":
        errors.add(404)
    if path == f"{V}/workflows" and method == "POST":
        errors.add(409)  # workflow_exists
    if path.endswith("/cancel"):
        errors |= {409, 412}  # run_finished, precondition_failed
    if path.endswith(("/claim", "/events/stream")):
        errors.add(429)  # too_many_requests: a cap on waiting requests (ADR 0025)
    return errors


OPERATION_KEYS = sorted(SPEC_OPERATIONS)
OPERATION_IDS = [f"{m} {p}" for m, p in OPERATION_KEYS]


def _operation(document: dict[str, Any], key: tuple[str, str]) -> dict[str, Any]:
    method, path = key
    operation: dict[str, Any] | None = document["paths"].get(path, {}).get(method.lower())
    assert operation is not None, f"the document has no operation for {method} {path}"
    return operation


# -- validity ------------------------------------------------------------------------------------


def test_document_is_valid_openapi_3_1(document: dict[str, Any]) -> None:
    assert re.fullmatch(r"3\.1\.\d+", document["openapi"]), document["openapi"]
    errors = [f"{e.instance_path}: {e.message}" for e in OPENAPI_31_VALIDATOR.iter_errors(document)]
    assert not errors, "not a valid OpenAPI 3.1 document:\n" + "\n".join(errors)


def test_schemathesis_loads_every_operation(document: dict[str, Any]) -> None:
    schema = schemathesis.openapi.from_dict(json.loads(json.dumps(document)))
    schema.validate()
    problems = [str(r.err()) for r in schema.get_all_operations() if isinstance(r, Err)]
    assert not problems, problems
    assert len(list(schema.get_all_operations())) == len(SPEC_OPERATIONS)


def test_every_ref_resolves(document: dict[str, Any]) -> None:
    refs = list(_refs(document))
    assert refs, "the document uses no $ref at all"
    for where, ref in refs:
        try:
            _resolve(document, {"$ref": ref})
        except AssertionError as exc:
            pytest.fail(f"{where}: {exc}")


def test_every_schema_is_valid_json_schema_2020_12(document: dict[str, Any]) -> None:
    problems: list[str] = []
    for where, schema in _schema_objects(document):
        try:
            jsonschema_rs.meta.validate(schema)
        except jsonschema_rs.ValidationError as exc:
            problems.append(f"{where}: {exc.message}")
        problems.extend(_unknown_keywords(schema, where))
    assert not problems, "\n".join(problems)


def test_every_operation_is_complete(document: dict[str, Any]) -> None:
    # OpenAPI 3.1 makes these optional; this API promises all of them for every operation.
    for method, path, operation in _operations(document):
        where = f"{method} {path}"
        assert operation.get("operationId"), f"{where}: no operationId"
        assert operation.get("summary"), f"{where}: no summary"
        assert operation.get("responses"), f"{where}: no responses"
        assert "security" in operation, f"{where}: no security requirement (not even [])"
        for status, response in operation["responses"].items():
            assert re.fullmatch(r"[1-5][0-9][0-9]", status), f"{where}: status {status!r}"
            assert response.get("description"), f"{where} {status}: no description"


def test_operation_ids_are_unique(document: dict[str, Any]) -> None:
    ids = [str(op.get("operationId")) for _, _, op in _operations(document)]
    assert all(isinstance(i, str) and i for i in ids), ids
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_path_templates_match_path_parameters(document: dict[str, Any]) -> None:
    for method, path, operation in _operations(document):
        templated = set(re.findall(r"\{([^}]+)\}", path))
        declared = [p for p in operation.get("parameters", []) if p["in"] == "path"]
        assert {p["name"] for p in declared} == templated, f"{method} {path}"
        assert all(p.get("required") is True for p in declared), f"{method} {path}"
        pairs = [(p["name"].lower(), p["in"]) for p in operation.get("parameters", [])]
        assert len(pairs) == len(set(pairs)), f"{method} {path}: duplicate parameters"


def test_security_schemes(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    bearer = [name for name, s in schemes.items() if s == {"type": "http", "scheme": "bearer"}]
    assert bearer, schemes
    for method, path, operation in _operations(document):
        for requirement in operation.get("security", []):
            for name, scopes in requirement.items():
                assert name in schemes, f"{method} {path}: unknown security scheme {name!r}"
                assert scopes == [], f"{method} {path}: http bearer takes no scopes"


# -- parity with the app and with SPEC §6 --------------------------------------------------------


def test_routes_and_document_are_in_parity(app: Starlette, document: dict[str, Any]) -> None:
    routes: set[tuple[str, str]] = set()
    for route in app.routes:
        assert isinstance(route, Route), f"unexpected route type {route!r}"
        assert route.methods is not None
        if route.path == "/ui" or route.path.startswith("/ui/"):
            continue  # the web console (SPEC §13): HTML pages, not operations of the API
        # Starlette adds HEAD to every GET route; HTTP (RFC 9110 §9.3.2) defines HEAD as GET
        # without the body, and OpenAPI documents conventionally leave it implied.
        routes |= {(method, route.path) for method in route.methods if method != "HEAD"}
    documented = {(method, path) for method, path, _ in _operations(document)}
    assert routes - documented == set(), "routes missing from the document"
    assert documented - routes == set(), "documented operations the app does not route"
    assert documented == set(SPEC_OPERATIONS), "the document differs from the table of SPEC §6"


@pytest.mark.anyio
async def test_served_document_is_the_generated_one(
    app: Starlette, document: dict[str, Any]
) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        response = await client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == document


@pytest.mark.parametrize("key", OPERATION_KEYS, ids=OPERATION_IDS)
def test_success_response(document: dict[str, Any], key: tuple[str, str]) -> None:
    operation = _operation(document, key)
    expected, _ = SPEC_OPERATIONS[key]
    assert _success_statuses(operation) == expected, operation["responses"].keys()
    for status in expected:
        response = operation["responses"][str(status)]
        assert response.get("description"), f"{status} has no description"
        content = response.get("content", {})
        if key == ("GET", "/metrics"):  # the Prometheus text format (SPEC §12)
            assert list(content) == ["text/plain"], f"{status}: {list(content)}"
            assert content["text/plain"]["schema"] == {"type": "string"}
            continue
        if key in SPEC_STREAMS:
            assert list(content) == ["text/event-stream"], f"{status}: {list(content)}"
            resume = [p for p in operation["parameters"] if p["name"] == "Last-Event-ID"]
            assert [p["in"] for p in resume] == ["header"], "a stream resumes after Last-Event-ID"
            # OpenAPI 3.1: the schema describes each event of the stream.
            kinds = {
                one["properties"]["event"]["const"]: one["properties"]["data"]
                for one in content["text/event-stream"]["schema"]["oneOf"]
            }
            assert set(kinds) == {"message", "end"}
            event = _resolve(document, kinds["message"]["contentSchema"])
            assert set(EVENT) <= set(event["properties"]), "each message's data is an event"
            assert kinds["message"]["contentMediaType"] == "application/json"
            end = _resolve(document, kinds["end"]["contentSchema"])
            assert set(end["required"]) == {"run_id", "status"}
            continue
        assert list(content) == ["application/json"], f"{status}: {list(content)}"
        schema = content["application/json"].get("schema")
        assert schema, f"{status} has no schema"
        assert _resolve(document, schema).get("type") == "object", f"{status}: not an object"


def test_a_429_says_when_to_try_again(document: dict[str, Any]) -> None:
    # ADR 0025: the waiting requests, and only they, are capped per caller.
    capped = {key for key in OPERATION_KEYS if "429" in _operation(document, key)["responses"]}
    assert capped == {
        ("POST", f"{V}/workers/{{worker_id}}/claim"),
        ("GET", f"{V}/runs/{{run_id}}/events/stream"),
    }
    for key in capped:
        header = _operation(document, key)["responses"]["429"]["headers"]["Retry-After"]
        assert header["required"] is True
        assert header["schema"] == {"type": "string", "pattern": "^[0-9]+$"}


@pytest.mark.parametrize("key", OPERATION_KEYS, ids=OPERATION_IDS)
def test_problem_responses(document: dict[str, Any], key: tuple[str, str]) -> None:
    method, path = key
    operation = _operation(document, key)
    _, role = SPEC_OPERATIONS[key]
    documented = {int(s) for s in operation["responses"] if s.isdigit()}
    missing = _expected_errors(method, path, role) - documented
    assert not missing, f"error statuses of SPEC §6 not documented: {sorted(missing)}"
    if role is PUBLIC:
        if path == "/readyz":  # not ready: 503 with {"status": ...}, not a problem (SPEC §6)
            content = operation["responses"].get("503", {}).get("content", {})
            assert list(content) == ["application/json"], "GET /readyz 503 is not documented"
            health = _resolve(document, content["application/json"]["schema"])
            assert "status" in health.get("required", []), health
        return
    for status, response in operation["responses"].items():
        if int(status) < 400:
            continue
        content = response.get("content", {})
        assert list(content) == [PROBLEM_MEDIA_TYPE], f"{status}: {list(content)}"
        assert content[PROBLEM_MEDIA_TYPE].get("schema") == {"$ref": PROBLEM_REF}, status


@pytest.mark.parametrize("key", OPERATION_KEYS, ids=OPERATION_IDS)
def test_security_requirement(document: dict[str, Any], key: tuple[str, str]) -> None:
    operation = _operation(document, key)
    _, role = SPEC_OPERATIONS[key]
    assert "security" in operation, "every operation states its security (even if none)"
    if role is PUBLIC:
        assert operation["security"] == [], "public operations need no credentials"
    else:
        assert operation["security"] == [{"bearer": []}]


@pytest.mark.parametrize("key", OPERATION_KEYS, ids=OPERATION_IDS)
def test_idempotency_key_on_every_post(document: dict[str, Any], key: tuple[str, str]) -> None:
    method, _ = key
    operation = _operation(document, key)
    headers = {p["name"].lower(): p for p in operation.get("parameters", []) if p["in"] == "header"}
    optional = method == "PUT"  # SPEC §6: an apply is idempotent by content; a key is optional
    if (method != "POST" and not optional) or SPEC_OPERATIONS[key][1] == WORKER:
        # SPEC §10: a worker's POSTs are fenced by its lease and take no Idempotency-Key.
        assert "idempotency-key" not in headers
        return
    parameter = headers.get("idempotency-key")
    assert parameter is not None, "a write without an Idempotency-Key header parameter"
    assert parameter.get("required") is not optional, "SPEC §6: every POST requires one"
    schema = parameter["schema"]
    assert schema.get("type") == "string"
    assert schema.get("minLength") == 1
    assert schema.get("maxLength") == 255
    # The pattern admits exactly the characters 0x21-0x7E.
    pattern = re.compile(schema["pattern"])
    for code in range(0x20, 0x80):
        admitted = pattern.fullmatch(chr(code) * 3) is not None
        assert admitted == (0x21 <= code <= 0x7E), f"pattern vs character {code:#x}"
    assert pattern.fullmatch("é") is None
    # A replay says so (SPEC §6): every success answer of a keyed POST declares the header.
    for status, response in operation["responses"].items():
        if status.startswith("2"):
            replayed = response["headers"].get("Idempotent-Replayed")
            assert replayed is not None, f"{status}: Idempotent-Replayed is not declared"
            assert replayed["schema"] == {"type": "string", "enum": ["true"]}


def test_a_drafts_script_is_documented_as_the_turns_it_accepts(document: dict[str, Any]) -> None:
    schema = document["components"]["schemas"]["CreateDraftRequest"]["properties"]["script"]
    (turns,) = [s for s in schema["anyOf"] if s.get("type") == "array"]
    assert turns["items"] == {
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("key", OPERATION_KEYS, ids=OPERATION_IDS)
def test_query_parameters(document: dict[str, Any], key: tuple[str, str]) -> None:
    operation = _operation(document, key)
    query = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "query"}
    fields = SPEC_RESOURCES.get(key)
    paged = fields is not None and fields[1]
    expected = set()
    if paged:
        expected = {"limit", "cursor"}
    if key == ("GET", f"{V}/runs"):
        expected |= {"workflow_id", "status", "order", "created_after", "created_before"}
    if key == ("GET", f"{V}/approvals"):
        expected |= {"status"}
    if key in SPEC_STREAMS:
        expected = {"after"}  # or the Last-Event-ID header
    assert set(query) == expected
    assert all(p.get("required", False) is False for p in query.values())
    if paged:
        limit = query["limit"]["schema"]
        assert limit.get("type") == "integer"
        assert (limit.get("minimum"), limit.get("maximum")) == (1, MAX_PAGE_LIMIT)
        assert limit.get("default") == DEFAULT_PAGE_LIMIT
        assert query["cursor"]["schema"].get("type") == "string"
    if "status" in query:
        statuses = (
            {"pending", "approved", "rejected", "expired", "canceled"}
            if key == ("GET", f"{V}/approvals")
            else {s.value for s in RunStatus}
        )
        assert set(query["status"]["schema"]["enum"]) == statuses
    if key == ("GET", f"{V}/runs"):  # SPEC §6 (amended 2026-12-01): newest first by default
        assert query["order"]["schema"]["enum"] == ["asc", "desc"]
        assert query["order"]["schema"]["default"] == "desc"
        for bound in ("created_after", "created_before"):
            assert query[bound]["schema"]["format"] == "date-time"


@pytest.mark.parametrize(
    "key", sorted(SPEC_RESOURCES), ids=[f"{m} {p}" for m, p in sorted(SPEC_RESOURCES)]
)
def test_resource_fields(document: dict[str, Any], key: tuple[str, str]) -> None:
    operation = _operation(document, key)
    fields, paged = SPEC_RESOURCES[key]
    (success, *_) = sorted(SPEC_OPERATIONS[key][0])
    schema = _resolve(
        document, operation["responses"][str(success)]["content"]["application/json"]["schema"]
    )
    if paged:
        assert {"items", "next_cursor"} <= set(schema.get("required", []))
        next_cursor = schema["properties"]["next_cursor"]
        assert _types(document, next_cursor) == {"string", "null"}
        items = schema["properties"]["items"]
        assert items.get("type") == "array"
        schema = _resolve(document, items["items"])
    properties = schema.get("properties", {})
    assert set(fields) <= set(properties), sorted(set(fields) - set(properties))
    assert set(fields) <= set(schema.get("required", [])), "resource fields are always sent"
    for name in fields:
        if name.endswith("_at"):
            assert _formats(document, properties[name]) == {"date-time"}, name
    if "error" in fields:
        error = [
            _resolve(document, s)
            for s in properties["error"].get("anyOf", [properties["error"]])
            if _resolve(document, s).get("type") == "object"
        ]
        assert error, "the error field is no object"
        assert set(ERROR_OBJECT) <= set(error[0]["properties"])


def _listed(document: dict[str, Any], path: str, method: str, member: str) -> dict[str, Any]:
    """The item schema of the array ``member`` of an operation's success body."""
    operation = _operation(document, (method, path))
    (success, *_) = sorted(SPEC_OPERATIONS[(method, path)][0])
    content = operation["responses"][str(success)]["content"]["application/json"]["schema"]
    schema = _resolve(document, content)
    assert member in schema.get("required", []), f"the body always has {member}"
    items = schema["properties"][member]
    assert items.get("type") == "array"
    item: dict[str, Any] = _resolve(document, items["items"])
    return item


def test_claim_items_carry_what_a_worker_needs(document: dict[str, Any]) -> None:
    """SPEC §10: the claim item's fields (the lease token is given only here)."""
    item = _listed(document, f"{V}/workers/{{worker_id}}/claim", "POST", "attempts")
    assert set(CLAIM_ITEM) <= set(item["properties"]), sorted(set(CLAIM_ITEM) - set(item))
    assert set(CLAIM_ITEM) <= set(item.get("required", []))
    assert _types(document, item["properties"]["traceparent"]) == {"string", "null"}


def test_queues_are_listed_whole(document: dict[str, Any]) -> None:
    """SPEC §10: GET /queues is not paged: ``{"items": [...]}`` with every queue."""
    item = _listed(document, f"{V}/queues", "GET", "items")
    assert set(QUEUE) <= set(item["properties"])
    assert set(QUEUE) <= set(item.get("required", []))


def test_heartbeat_answers_the_new_lease(document: dict[str, Any]) -> None:
    operation = _operation(document, ("POST", f"{V}/attempts/{{attempt_id}}/heartbeat"))
    schema = _resolve(
        document, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert _formats(document, schema["properties"]["lease_expires_at"]) == {"date-time"}


def test_lease_lost_problems_carry_a_reason(document: dict[str, Any]) -> None:
    schema = _resolve(document, {"$ref": PROBLEM_REF})
    assert "reason" in schema["properties"], "409 lease_lost has a reason member (SPEC §10)"


def _types(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    schema = _resolve(document, schema)
    if "anyOf" in schema:
        return set().union(*(_types(document, s) for s in schema["anyOf"]))
    kind = schema.get("type")
    return {str(k) for k in kind} if isinstance(kind, list) else {str(kind)}


def _formats(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    schema = _resolve(document, schema)
    alternatives = schema.get("anyOf", [schema])
    return {
        _resolve(document, s)["format"]
        for s in alternatives
        if _resolve(document, s).get("type") == "string"
    }


def test_problem_details_schema(document: dict[str, Any]) -> None:
    schema = _resolve(document, {"$ref": PROBLEM_REF})
    assert set(PROBLEM) <= set(schema["required"])
    assert "errors" in schema["properties"], "validation problems carry errors (SPEC §6)"
    assert _types(document, schema["properties"]["status"]) == {"integer"}


@pytest.mark.parametrize("key", OPERATION_KEYS, ids=OPERATION_IDS)
def test_request_bodies(document: dict[str, Any], key: tuple[str, str]) -> None:
    method, path = key
    operation = _operation(document, key)
    body = operation.get("requestBody")
    definition = {"id": "wf", "tasks": [{"key": "a", "action": "mock"}]}
    if path.endswith("/workflows") and method == "POST":
        assert body is not None
        assert body.get("required") is True
        assert list(body["content"]) == ["application/json"]
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert validator.is_valid(definition)
        assert not validator.is_valid({**definition, "unknown": 1}), "unknown fields → 400"
    elif (path.endswith("/versions") and method == "POST") or method == "PUT":
        assert body is not None
        assert body.get("required") is True
        assert list(body["content"]) == ["application/json"]
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert validator.is_valid(definition)
        without_id = {"tasks": definition["tasks"]}
        assert validator.is_valid(without_id), (
            "SPEC §6: in POST …/versions the body's id may be omitted, but the documented "
            "request body schema requires it"
        )
    elif path.endswith("/runs") and method == "POST":
        assert body is not None
        assert body.get("required", False) is False, "the body is optional"
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert validator.is_valid({"input": {"x": [1, "two", None]}})
        assert validator.is_valid({})
        assert not validator.is_valid({"input": []})
    elif path.endswith("/claim"):
        assert body is not None
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert validator.is_valid({"queues": ["default"], "actions": ["resize"]})
        full = {"queues": ["q"], "actions": ["a"], "max_attempts": 100, "wait_seconds": 50}
        assert validator.is_valid(full)
        assert not validator.is_valid({"queues": [], "actions": ["a"]}), "queues is non-empty"
        assert not validator.is_valid({**full, "max_attempts": 101})
        assert not validator.is_valid({**full, "wait_seconds": 51})
    elif path.endswith(("/heartbeat", "/complete", "/fail")):
        assert body is not None
        assert body.get("required") is True
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert not validator.is_valid({}), "the lease token is required"
        report: dict[str, Any] = {"lease_token": "t"}
        if path.endswith("/complete"):
            report["output"] = {}
        if path.endswith("/fail"):
            report["error"] = {"code": "e", "message": "m"}
        assert validator.is_valid(report)
    elif path.endswith("/decision"):
        assert body is not None
        assert body.get("required") is True
        validator = _validator(document, body["content"]["application/json"]["schema"])
        decision = {"decision": "approve", "arguments_digest": "sha256:" + "0" * 64}
        assert validator.is_valid(decision)
        assert validator.is_valid({**decision, "decision": "reject", "comment": "no"})
        assert not validator.is_valid({**decision, "decision": "maybe"})
        assert not validator.is_valid({"decision": "approve"}), "the digest is required"
    elif path.endswith("/drafts") and method == "POST":
        assert body is not None
        assert body.get("required") is True
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert validator.is_valid({"prompt": "nightly report"})
        assert validator.is_valid({"prompt": "p", "model": "mock", "script": [{"content": "x"}]})
        assert not validator.is_valid({}), "the prompt is required"
    elif path.endswith("/approve") and method == "POST":
        assert body is not None
        validator = _validator(document, body["content"]["application/json"]["schema"])
        assert validator.is_valid({"definition_hash": "sha256:" + "0" * 64})
        assert not validator.is_valid({})
    elif method == "POST":  # cancel, reject: no body fields
        assert body is None or body.get("required", False) is False
    else:
        assert body is None, "GET operations take no body"


def _undocumented_headers(document: dict[str, Any], wanted: dict[str, Any]) -> dict[str, list[str]]:
    """``{header: ["METHOD path status", ...]}`` where ``wanted(method, path, status)`` asks."""
    missing: dict[str, list[str]] = {}
    for method, path, operation in _operations(document):
        for status, response in operation["responses"].items():
            headers = {name.lower() for name in response.get("headers", {})}
            for header, applies in wanted.items():
                if applies(method, path, status) and header not in headers:
                    missing.setdefault(header, []).append(f"{method} {path} {status}")
    return missing


def _report(missing: dict[str, list[str]]) -> str:
    return "\n".join(
        f"{header} is undocumented on {len(where)} responses: " + ", ".join(where)
        for header, where in missing.items()
    )


def test_spec_resource_headers_are_documented(document: dict[str, Any]) -> None:
    """GET run answers with ``ETag`` and run start with ``Location`` (SPEC §6)."""
    start_run = f"{V}/workflows/{{workflow_id}}/versions/{{version}}/runs"
    missing = _undocumented_headers(
        document,
        {
            "etag": lambda m, p, s: (m, p, s) == ("GET", f"{V}/runs/{{run_id}}", "200"),
            "location": lambda m, p, s: (m, p, s) == ("POST", start_run, "202"),
        },
    )
    assert not missing, _report(missing)


def test_spec_problem_headers_are_documented(document: dict[str, Any]) -> None:
    """Every response carries ``X-Request-ID``; a 401 ``WWW-Authenticate`` (SPEC §6, RFC 6750)."""
    missing = _undocumented_headers(
        document,
        {
            "x-request-id": lambda m, p, s: True,
            "www-authenticate": lambda m, p, s: s == "401",
        },
    )
    assert not missing, _report(missing)


# -- staleness -----------------------------------------------------------------------------------


def test_committed_document_is_current(document: dict[str, Any]) -> None:
    expected = json.dumps(document, indent=2, sort_keys=True) + "\n"
    actual = DOCUMENT_FILE.read_text(encoding="utf-8") if DOCUMENT_FILE.exists() else ""
    assert actual == expected, (
        f"{DOCUMENT_FILE} is stale (or missing); regenerate it from the repository root with:\n"
        f"    {REGENERATE}"
    )

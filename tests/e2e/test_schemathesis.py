"""Schemathesis against the live API (SPEC §6): no 5xx, and every response as documented.

The document is fetched from the running service (``/api/v1/openapi.json``); every operation is
exercised with generated requests — conforming ones (positive) and ones that break the document
(negative) — once as an operator and once as a viewer. Some data is seeded first and its ids are
mixed into the generated path parameters, so reads of existing resources (and cancels of a
running and of a finished run) are exercised, not only 404s.

Every response goes through schemathesis's own checks. Failures are collected across all
operations and reported together (deduplicated, with a curl command to reproduce), instead of
stopping at the first: the server keeps state between requests, so Hypothesis's replay and
shrinking could not reproduce an example faithfully anyway.

A last test sends, through the same checks, JSON wire forms schemathesis cannot generate.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import pytest
import schemathesis
from hypothesis import given, settings
from schemathesis import APIOperation, Case, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.errors import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi
from tests.waiting import wait_until

pytestmark = [
    pytest.mark.real_http_only,
    # The live API runs in a thread of this process, and its connection pool draws jitter from
    # the global `random` (psycopg_pool) whenever it connects. Hypothesis sees the global state
    # move while it draws a case and takes it for a strategy using `random` — a deprecation
    # warning, raised as an error, that the replay does not reproduce (FlakyFailure). No
    # strategy of ours or schemathesis's is involved; every other warning stays an error.
    pytest.mark.filterwarnings(
        "ignore:Do not use the `random` module inside strategies"
        ":hypothesis.errors.HypothesisDeprecationWarning"
    ),
]

AnyCase = Case[Any]
Operation = APIOperation[Any, Any, Any, Any]

POSITIVE_EXAMPLES = 30
NEGATIVE_EXAMPLES = 10
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
FAILURES_SHOWN = 2  # full reports per distinct failure; the rest are counted

SEEDED_V1 = {
    "id": "seeded",
    "description": "seeded for schemathesis",
    "tasks": [
        {"key": "a", "action": "mock", "input": {"output": {"answer": 42}}},
        {
            "key": "b",
            "action": "mock",
            "depends_on": ["a"],
            "input": {"fail_first": 1},
            "retry": {"max_attempts": 2, "initial_backoff_seconds": 0.01},
        },
        {"key": "c", "action": "mock", "depends_on": ["a"], "input": {"fail_always": True}},
        {"key": "d", "action": "mock", "depends_on": ["b", "c"]},
    ],
}
SEEDED_V2 = {"tasks": [{"key": "slow", "action": "mock", "input": {"sleep_ms": 600_000}}]}


@dataclass
class Findings:
    """What the generated requests found, across operations."""

    examples: Counter[str] = field(default_factory=Counter)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    failures: dict[tuple[str, int, tuple[str, ...]], list[str]] = field(default_factory=dict)

    def record(
        self, case: AnyCase, response: Response, failure: FailureGroup | None, note: str = ""
    ) -> None:
        label = case.operation.label
        status = response.status_code
        self.examples[label] += 1
        self.outcomes.setdefault(label, Counter())[_outcome(response)] += 1
        if failure is not None:
            titles = tuple(sorted({f.title for f in failure.exceptions}))
            message = f"Request body: {note}\n{failure.message}" if note else failure.message
            self.failures.setdefault((label, status, titles), []).append(message)

    def summary(self) -> str:
        return "\n".join(
            f"  {label}: {self.examples[label]} examples: "
            + ", ".join(f"{outcome} ×{n}" for outcome, n in sorted(counts.items()))
            for label, counts in sorted(self.outcomes.items())
        )

    def report(self) -> str:
        parts = [f"{len(self.failures)} distinct failures:"]
        for (label, status, titles), messages in sorted(self.failures.items()):
            parts.append(f"\n=== {label} → {status}: {', '.join(titles)} ({len(messages)}×)")
            parts.extend(messages[:FAILURES_SHOWN])
        return "\n".join(parts)


def _outcome(response: Response) -> str:
    """The status, and the problem code of an error."""
    if response.status_code < 400:
        return str(response.status_code)
    try:
        body = response.json()
    except ValueError:
        body = None
    code = body.get("code") if isinstance(body, dict) else None
    return f"{response.status_code} {code}"


@dataclass(frozen=True)
class Seeds:
    """Ids of seeded resources, as path parameters, and cursors onto their second pages."""

    paths: list[dict[str, str]]
    cursors: dict[str, str]  # operation path -> next_cursor of its first page under paths[0]


def _seed(live_api: LiveApi) -> Seeds:
    """A failed run (with retries, errors, a skipped task), a running one, and their ids."""
    keys = (f"seed-{n}" for n in itertools.count())

    def post(path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        response = live_api.operator.post(path, json=body, headers={"Idempotency-Key": next(keys)})
        assert response.status_code in {201, 202}, response.text
        result: dict[str, Any] = response.json()
        return result

    post("/api/v1/workflows", SEEDED_V1)
    post("/api/v1/workflows", {**SEEDED_V2, "id": "seeded-too"})
    post("/api/v1/workflows/seeded/versions", SEEDED_V2)
    finished = post("/api/v1/workflows/seeded/versions/1/runs", {"input": {"seed": True}})
    running = post("/api/v1/workflows/seeded/versions/2/runs")
    assert live_api.wait_for_run(finished["run_id"])["status"] == "failed"
    wait_until(
        lambda: (
            live_api.viewer.get(f"/api/v1/runs/{running['run_id']}").json()["status"] == "running"
        ),
        timeout=10,
        message="the seeded slow run never started",
    )
    paths = [
        {"workflow_id": "seeded", "version": "1", "run_id": finished["run_id"], "task_key": "b"},
        {"workflow_id": "seeded", "version": "2", "run_id": running["run_id"], "task_key": "slow"},
    ]
    cursors = {}
    for template in (
        "/api/v1/workflows",
        "/api/v1/workflows/{workflow_id}/versions",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}/tasks",
        "/api/v1/runs/{run_id}/tasks/{task_key}/attempts",
        "/api/v1/runs/{run_id}/events",
    ):
        page = live_api.viewer.get(template.format(**paths[0]), params={"limit": 1})
        assert page.status_code == 200, page.text
        cursors[template] = page.json()["next_cursor"]
        assert cursors[template], f"{template}: the seeded data has a single page"
    return Seeds(paths, cursors)


def _strategy(operation: Operation, seeds: Seeds) -> st.SearchStrategy[AnyCase]:
    """Generated requests; the same naming seeded resources; and the same on a second page."""
    names = set(re.findall(r"\{(\w+)\}", operation.path))
    strategies = [operation.as_strategy(GenerationMode.POSITIVE)]
    paths = seeds.paths if names else []
    if operation.path.endswith("/events/stream"):
        # A running run's stream lasts as long as the run (keep-alives every 15 s), and a case
        # is checked on its whole response: stream the finished run's history only.
        paths = paths[:1]
    for path in paths:
        seeded = operation.as_strategy(
            GenerationMode.POSITIVE,
            path_parameters={k: v for k, v in path.items() if k in names},
        )
        if operation.method.upper() == "POST" and operation.path.endswith("/versions"):
            # The generated body names some other workflow (400 workflow_id_mismatch); name
            # the path's, so that versions really get created.
            seeded = seeded.map(_same_workflow_id)
        strategies.append(seeded)
    cursor = seeds.cursors.get(operation.path)
    if cursor is not None:
        strategies.append(
            operation.as_strategy(
                GenerationMode.POSITIVE,
                path_parameters={k: v for k, v in seeds.paths[0].items() if k in names},
                query={"cursor": cursor},
            )
        )
    return st.one_of(strategies)


def _same_workflow_id(case: AnyCase) -> AnyCase:
    if isinstance(case.body, dict) and "id" in case.body and case.path_parameters:
        case.body = {**case.body, "id": case.path_parameters["workflow_id"]}
    return case


def _negatable(operation: Operation) -> bool:
    """Whether a request can break the document: path parameters are plain strings (anything
    goes) and the Authorization header is fixed, so only query, headers and bodies can."""
    headers = [p for p in operation.headers if p.name.lower() != "authorization"]
    return bool(len(operation.query) or len(operation.body) or headers)


def _exercise(
    strategy: st.SearchStrategy[AnyCase], max_examples: int, call: Callable[[AnyCase, bool], None]
) -> None:
    @settings(
        max_examples=max_examples,
        derandomize=True,  # the same requests on every run
        database=None,  # nothing to replay: the server's state differs on every run anyway
        deadline=None,  # requests hit a real server and PostgreSQL; latency is not the point
        # No health check is suppressed: this is no pytest test function (so no fixture is
        # shared across examples), generation is fast (only the request is slow, and that is
        # not timed), and negative mode is used only where something can be negated.
        suppress_health_check=(),
    )
    @given(case=strategy, reuse_key=st.booleans())
    def exercise(case: AnyCase, reuse_key: bool) -> None:
        call(case, reuse_key)

    exercise()


def check_live_api(live_api: LiveApi, token: str, document: dict[str, Any]) -> Findings:
    """Exercise every operation of ``document`` against the live API as ``token``."""
    seeds = _seed(live_api)
    schema = schemathesis.openapi.from_dict(document)
    schema.config.update(base_url=live_api.base_url, headers={"Authorization": f"Bearer {token}"})
    findings = Findings()
    fresh = itertools.count()

    def call(case: AnyCase, reuse_key: bool) -> None:
        key = case.headers.get("Idempotency-Key") if case.headers else None
        if not reuse_key and isinstance(key, str) and re.fullmatch(r"[\x21-\x7e]{1,200}", key):
            # Unless the example reuses the generated key (replays, idempotency_key_reused), it
            # gets a unique suffix, so writes really happen; it stays within the pattern.
            case.headers["Idempotency-Key"] = f"{key}.{next(fresh)}"
        response = case.call(timeout=30)
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as failure:
            findings.record(case, response, failure)
        else:
            findings.record(case, response, None)

    operations: list[Operation] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), f"schemathesis cannot use an operation: {result.err()}"
        operations.append(result.ok())
    documented = {(m.upper(), p) for p, item in document["paths"].items() for m in item}
    assert {(op.method.upper(), op.path) for op in operations} == documented
    for operation in operations:
        _exercise(_strategy(operation, seeds), POSITIVE_EXAMPLES, call)
        if _negatable(operation):
            negative = operation.as_strategy(GenerationMode.NEGATIVE)
            _exercise(negative, NEGATIVE_EXAMPLES, call)
    return findings


@pytest.mark.parametrize("token", [OPERATOR_TOKEN, VIEWER_TOKEN], ids=["operator", "viewer"])
def test_live_api_conforms_to_its_document(live_api: LiveApi, token: str) -> None:
    # The served document, loaded as a dict: schemathesis.openapi.from_url would leave out the
    # document's own endpoint as "not part of the API".
    served = live_api.anonymous.get("/api/v1/openapi.json")
    assert served.status_code == 200, served.text
    findings = check_live_api(live_api, token, served.json())
    print(f"\n{findings.summary()}")
    assert not findings.failures, findings.report() + "\n\n" + findings.summary()


# Wire forms of JSON that schemathesis never sends (it serializes Python values, and Hypothesis
# generates neither lone surrogates nor overflowing numbers), each valid JSON *syntax*:
# SPEC §6 says they are 400s ("no NaN/Infinity", UTF-8), and that nothing may produce a 500.
WIRE_PROBES: list[tuple[str, str, dict[str, str], bytes]] = [
    ("POST", "/api/v1/workflows/{workflow_id}/versions/{version}/runs",
     {"workflow_id": "seeded", "version": "1"}, b'{"input": {"n": 1e400}}'),
    ("POST", "/api/v1/workflows/{workflow_id}/versions/{version}/runs",
     {"workflow_id": "seeded", "version": "1"}, b'{"input": {"s": "\\ud800"}}'),
    ("POST", "/api/v1/workflows/{workflow_id}/versions/{version}/runs",
     {"workflow_id": "seeded", "version": "1"}, b'{"input": {"n": NaN}}'),
    ("POST", "/api/v1/workflows", {},
     b'{"id": "probe-a", "tasks": [{"key": "a", "action": "mock", "timeout_seconds": 1e400}]}'),
    ("POST", "/api/v1/workflows", {},
     b'{"id": "probe-b", "description": "\\udfff", "tasks": [{"key": "a", "action": "mock"}]}'),
    ("POST", "/api/v1/workflows", {},
     b'{"id": "probe-c", "id": "probe-c", "tasks": [{"key": "a", "action": "mock"}]}'),
    ("POST", "/api/v1/workflows/{workflow_id}/versions", {"workflow_id": "seeded"},
     b'{"tasks": [{"key": "a", "action": "mock", "input": {"n": -1e400}}]}'),
    ("POST", "/api/v1/workflows/{workflow_id}/versions", {"workflow_id": "seeded"},
     b'{"tasks": [{"key": "\\ud800", "action": "mock"}]}'),
]  # fmt: skip


def test_json_edge_cases_are_client_errors(live_api: LiveApi) -> None:
    _seed(live_api)
    schema = schemathesis.openapi.from_dict(live_api.anonymous.get("/api/v1/openapi.json").json())
    schema.config.update(base_url=live_api.base_url)
    findings = Findings()
    for n, (method, path, path_parameters, body) in enumerate(WIRE_PROBES):
        case = schema[path][method].Case(
            path_parameters=path_parameters,
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}", "Idempotency-Key": f"probe-{n}"},
            body=body,  # bytes: sent as they are
            media_type="application/json",
        )
        response = case.call(timeout=30)
        try:
            case.validate_response(response, checks=CHECKS)
        except FailureGroup as failure:
            findings.record(case, response, failure, note=body.decode())
        else:
            findings.record(case, response, None)
    assert not findings.failures, findings.report() + "\n\n" + findings.summary()

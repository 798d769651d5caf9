"""Hostile input on every path into the live API (SPEC §6).

Every malformed, oversized, mistyped or malicious input gets the right 4xx problem (never a 5xx)
and writes nothing. Each input is one parametrized case with a short id (``pytest -k`` selects
them, and a failure names its input): the case seeds what it needs, sends its one input, checks
the answer, and lists workflows, versions and runs before and after to show that nothing was
written. The inputs that must be accepted (controls) are cases of their own.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from _pytest.mark import ParameterSet

from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi, settings

V1 = "/api/v1"
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code", "request_id"}
JSON = {"Content-Type": "application/json"}
MIB = 1024 * 1024

WORKFLOW_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")

_keys = itertools.count()


def idem() -> dict[str, str]:
    """A fresh Idempotency-Key header."""
    return {"Idempotency-Key": f"hostile-{next(_keys)}"}


def definition(workflow_id: str = "victim", **task: Any) -> dict[str, Any]:
    """A valid one-task definition; ``task`` overrides the task's fields."""
    return {"id": workflow_id, "tasks": [{"key": "a", "action": "mock", **task}]}


def encode(value: Any) -> bytes:
    return json.dumps(value).encode()


def table(*params: ParameterSet) -> list[ParameterSet]:
    """The cases of one parametrized test; every case has its own id."""
    ids = Counter(param.id for param in params)
    assert None not in ids, "a case without an id"
    duplicates = sorted(str(case_id) for case_id, count in ids.items() if count > 1)
    assert not duplicates, f"duplicate case ids: {duplicates}"
    return list(params)


BOTH_PARSERS = pytest.mark.parametrize(
    "api_settings",
    [pytest.param(settings(http_parser=parser), id=parser) for parser in ("h11", "httptools")],
)
"""For a test of raw bytes on a socket: once with each HTTP parser (ADR 0036)."""


# -- assertions --------------------------------------------------------------------------------


def problem_failures(
    response: httpx.Response,
    status: int,
    code: str | set[str],
    error_path: str | None = None,
) -> list[str]:
    """Why ``response`` is not the expected problem (empty when it is)."""
    wrong: list[str] = []
    if response.status_code != status:
        return [f"status {response.status_code} != {status}: {response.text[:300]!r}"]
    media = response.headers.get("content-type", "").split(";")[0].strip()
    if media != "application/problem+json":
        wrong.append(f"content-type {media!r} is not application/problem+json")
    try:
        body = response.json()
    except ValueError:
        return [*wrong, f"body is not JSON: {response.text[:300]!r}"]
    if not isinstance(body, dict):
        return [*wrong, f"body is not an object: {body!r}"]
    missing = PROBLEM_FIELDS - body.keys()
    if missing:
        wrong.append(f"problem lacks {sorted(missing)}")
    codes = {code} if isinstance(code, str) else code
    if body.get("code") not in codes:
        wrong.append(f"code {body.get('code')!r} not in {sorted(codes)} ({body.get('detail')!r})")
    if body.get("status") != status:
        wrong.append(f"body status {body.get('status')!r} != {status}")
    for field in ("type", "title", "detail"):
        if not isinstance(body.get(field), str) or not body.get(field):
            wrong.append(f"{field} is not a non-empty string: {body.get(field)!r}")
    request_id = response.headers.get("x-request-id")
    if not request_id or body.get("request_id") != request_id:
        wrong.append(f"request_id {body.get('request_id')!r} != X-Request-ID {request_id!r}")
    if body.get("code") == "invalid_definition" or error_path is not None:
        errors = body.get("errors")
        if not isinstance(errors, list) or not errors:
            wrong.append(f"no errors list: {body!r}")
        else:
            for item in errors:
                if not (
                    isinstance(item, dict)
                    and isinstance(item.get("path"), str)
                    and isinstance(item.get("message"), str)
                ):
                    wrong.append(f"error item without path/message: {item!r}")
            paths = [item.get("path") for item in errors if isinstance(item, dict)]
            if error_path is not None and error_path not in paths:
                wrong.append(f"errors do not name {error_path!r}: {paths!r}")
    return wrong


def assert_problem(
    response: httpx.Response, status: int, code: str | set[str], *error_paths: str
) -> None:
    """``response`` is the expected problem, and its errors name every one of ``error_paths``."""
    wrong: list[str] = []
    for error_path in error_paths or (None,):
        wrong += [w for w in problem_failures(response, status, code, error_path) if w not in wrong]
    assert not wrong, "; ".join(w if len(w) < 400 else w[:400] + "…" for w in wrong)


def assert_status(response: httpx.Response, status: int) -> None:
    """``response`` has ``status`` and a request id."""
    assert response.status_code == status, (
        f"status {response.status_code} != {status}: {response.text[:300]!r}"
    )
    assert response.headers.get("x-request-id"), "no X-Request-ID"


# -- what the database holds --------------------------------------------------------------------


def pages(client: httpx.Client, path: str, **params: str) -> Iterator[dict[str, Any]]:
    """Every item of a listing, page by page."""
    cursor: str | None = None
    while True:
        query = {"limit": "200", **params}
        if cursor is not None:
            query["cursor"] = cursor
        response = client.get(path, params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        yield from body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return


def snapshot(live: LiveApi) -> dict[str, Any]:
    """Workflows with their versions, and run ids: what a rejected request must not change."""
    workflows = {
        w["workflow_id"]: [
            (v["version"], v["definition_hash"])
            for v in pages(live.viewer, f"{V1}/workflows/{w['workflow_id']}/versions")
        ]
        for w in pages(live.viewer, f"{V1}/workflows")
    }
    runs = sorted(r["run_id"] for r in pages(live.viewer, f"{V1}/runs"))
    return {"workflows": workflows, "runs": runs}


def create(live: LiveApi, body: Mapping[str, Any]) -> dict[str, Any]:
    response = live.operator.post(f"{V1}/workflows", json=body, headers=idem())
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def start(live: LiveApi, workflow_id: str, version: int = 1, **body: Any) -> dict[str, Any]:
    response = live.operator.post(
        f"{V1}/workflows/{workflow_id}/versions/{version}/runs", json=body, headers=idem()
    )
    assert response.status_code == 202, response.text
    run: dict[str, Any] = response.json()
    return run


# -- raw HTTP, for what httpx will not send -----------------------------------------------------


def raw_exchange(base_url: str, request: bytes, timeout: float = 10) -> httpx.Response:
    """Send ``request`` bytes on a fresh connection and read one response."""
    url = httpx.URL(base_url)
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=timeout) as sock:
        sock.sendall(request)
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        head, _, rest = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = [
            (name.strip(), value.strip())
            for name, _, value in (line.partition(":") for line in lines[1:])
        ]
        length = int({k.lower(): v for k, v in headers}.get("content-length", "0"))
        while len(rest) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    return httpx.Response(status, headers=headers, content=rest[:length])


def raw_post(path: str, headers: Mapping[str, bytes], body: bytes = b"") -> bytes:
    lines = [f"POST {path} HTTP/1.1".encode(), b"Host: 127.0.0.1", b"Connection: close"]
    lines += [name.encode() + b": " + value for name, value in headers.items()]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


# -- POST /workflows bodies --------------------------------------------------------------------

MALFORMED_JSON = {
    "open-brace": b"{",
    "close-brace": b"}",
    "trailing-comma": b'{"id": "x",}',
    "single-quotes": b"{'id': 'x'}",
    "missing-colon": b'{"id" "x"}',
    "trailing-text": b'{"id": "x"} trailing',
    "two-objects": b'{"id": "x"}{"id": "y"}',
    "unclosed-array": b'{"id": "x", "tasks": [}',
    "undefined": b'{"id": undefined}',
    "python-true": b'{"id": True}',
    "leading-zero": b'{"a": 01}',
    "leading-dot": b'{"a": .5}',
    "hex-escape": b'{"a": "\\x41"}',
    "raw-tab": b'{"a": "raw\tcontrol"}',
    "unterminated-string": b'{"a": "unterminated}',
    "comment": b"/* comment */ {}",
    "nul-byte": b"\x00",
    "space": b" ",
}

DUPLICATE_KEYS = {
    "id": b'{"id": "victim", "id": "victim", "tasks": [{"key": "a", "action": "mock"}]}',
    "task-key": b'{"id": "victim", "tasks": [{"key": "a", "key": "b", "action": "mock"}]}',
    "input-key": (
        b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": {"x": 1, "x": 2}}]}'
    ),
    "deep-input-key": b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "input": {"deep": [{"y": {"z": 1, "z": 1}}]}}]}',
    "retry-key": b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "retry": {"max_attempts": 2, "max_attempts": 3}}]}',
}

NON_FINITE = {
    "nan-input": (
        b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": {"x": NaN}}]}'
    ),
    "infinity-timeout": (
        b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "timeout_seconds": Infinity}]}'
    ),
    "minus-infinity-backoff": b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "retry": {"initial_backoff_seconds": -Infinity}}]}',
    "nan-extra-field": (
        b'{"id": "victim", "extra": NaN, "tasks": [{"key": "a", "action": "mock"}]}'
    ),
}

WRONG_TYPES: dict[str, tuple[dict[str, Any], str]] = {
    "max-attempts-string": (
        definition(retry={"max_attempts": "3"}),
        "/tasks/0/retry/max_attempts",
    ),
    "max-attempts-bool": (definition(retry={"max_attempts": True}), "/tasks/0/retry/max_attempts"),
    "backoff-string": (
        definition(retry={"initial_backoff_seconds": "1"}),
        "/tasks/0/retry/initial_backoff_seconds",
    ),
    "timeout-string": (definition(timeout_seconds="30"), "/tasks/0/timeout_seconds"),
    "depends-on-string": (definition(depends_on="b"), "/tasks/0/depends_on"),
    "input-list": (definition(input=[]), "/tasks/0/input"),
    "input-string": (definition(input="x"), "/tasks/0/input"),
    "action-null": (definition(action=None), "/tasks/0/action"),
    "retry-string": (definition(retry="fast"), "/tasks/0/retry"),
    "key-number": ({"id": "victim", "tasks": [{"key": 5, "action": "mock"}]}, "/tasks/0/key"),
    "id-number": ({"id": 7, "tasks": [{"key": "a", "action": "mock"}]}, "/id"),
    "tasks-object": ({"id": "victim", "tasks": {"key": "a", "action": "mock"}}, "/tasks"),
    "task-string": ({"id": "victim", "tasks": ["a"]}, "/tasks/0"),
    "description-list": ({**definition(), "description": ["text"]}, "/description"),
}

UNKNOWN_FIELDS: dict[str, tuple[dict[str, Any], str]] = {
    "top-level": ({**definition(), "color": "red"}, "/color"),
    "task": (definition(colour="blue"), "/tasks/0/colour"),
    "retry": (definition(retry={"max_attempts": 2, "jitter": True}), "/tasks/0/retry/jitter"),
}

NUL_STRINGS: dict[str, tuple[bytes, str]] = {
    "description": (encode({**definition(), "description": "a\u0000b"}), "/description"),
    "input-value": (encode(definition(input={"x": "a\u0000b"})), "/tasks/0/input/x"),
    "input-key": (encode(definition(input={"a\u0000b": 1})), "/tasks/0/input/a\u0000b"),
    "input-list-item": (
        encode(definition(input={"list": ["ok", "\u0000"]})),
        "/tasks/0/input/list/1",
    ),
    "action": (encode(definition(action="mo\u0000ck")), "/tasks/0/action"),
    "field-name": (encode({**definition(), "un\u0000known": 1}), "/un\u0000known"),
}

LONE_SURROGATES = {
    "description": (
        b'{"id": "victim", "description": "\\ud800", "tasks": [{"key": "a", "action": "mock"}]}'
    ),
    "input-value": b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "input": {"x": "\\udc00\\ud800"}}]}',
    "input-key": (
        b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": {"\\ud800": 1}}]}'
    ),
    "action": b'{"id": "victim", "tasks": [{"key": "a", "action": "\\ud800"}]}',
    "id": b'{"id": "victim\\ud800", "tasks": [{"key": "a", "action": "mock"}]}',
    "field-name": b'{"id": "victim", "\\ud800": 1, "tasks": [{"key": "a", "action": "mock"}]}',
    "depends-on": (
        b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "depends_on": ["\\ud800"]}]}'
    ),
}

NOT_UTF8 = {
    "latin-1": b'{"id": "caf\xe9", "tasks": [{"key": "a", "action": "mock"}]}',
    "encoded-surrogate": (
        b'{"id": "victim", "description": "\xed\xa0\x80",'
        b' "tasks": [{"key": "a", "action": "mock"}]}'
    ),
    "overlong-slash": (
        b'{"id": "victim", "description": "\xc0\xaf", "tasks": [{"key": "a", "action": "mock"}]}'
    ),
    "ff-fe": (
        b'{"id": "victim", "description": "\xff\xfe", "tasks": [{"key": "a", "action": "mock"}]}'
    ),
    "utf-16": '{"id": "victim", "tasks": [{"key": "a", "action": "mock"}]}'.encode("utf-16"),
}

NOT_OBJECTS = {
    "empty-array": b"[]",
    "array-of-object": b'[{"id": "victim"}]',
    "string": b'"victim"',
    "number": b"42",
    "null": b"null",
    "true": b"true",
}

UNSUPPORTED_TYPES = {
    "missing": None,
    "text-plain": "text/plain",
    "charset-latin-1": "application/json; charset=latin-1",
    "charset-utf-16": "application/json; charset=utf-16",
    "form": "application/x-www-form-urlencoded",
    "multipart": "multipart/form-data; boundary=x",
    "jsonx": "application/jsonx",
    "text-json": "text/json",
}


def nested_arrays(levels: int) -> str:
    return "[" * levels + "]" * levels


def nested_objects(levels: int) -> str:
    return '{"n": ' * levels + "1" + "}" * levels


def with_input(raw_input: str) -> bytes:
    return (
        '{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": ' + raw_input + "}]}"
    ).encode()


VALID = encode(definition())
EITHER = {"invalid_json", "invalid_definition"}


def rejected(
    case_id: str,
    body: bytes,
    code: str | set[str],
    *error_paths: str,
    status: int = 400,
    headers: Mapping[str, str] = JSON,
) -> ParameterSet:
    return pytest.param(body, dict(headers), status, code, error_paths, id=case_id)


REJECTED_DEFINITIONS = table(
    *(rejected(f"json-{name}", body, "invalid_json") for name, body in MALFORMED_JSON.items()),
    *(
        rejected(f"duplicate-key-{name}", body, "invalid_json")
        for name, body in DUPLICATE_KEYS.items()
    ),
    *(rejected(f"non-finite-{name}", body, "invalid_json") for name, body in NON_FINITE.items()),
    *(
        rejected(f"wrong-type-{name}", encode(value), "invalid_definition", path)
        for name, (value, path) in WRONG_TYPES.items()
    ),
    *(
        rejected(f"unknown-field-{name}", encode(value), "invalid_definition", path)
        for name, (value, path) in UNKNOWN_FIELDS.items()
    ),
    # Every problem is reported, not only the first.
    rejected(
        "two-problems",
        encode(
            {
                "id": "victim",
                "color": 1,
                "tasks": [{"key": "a", "action": "mock", "timeout_seconds": "9"}],
            }
        ),
        "invalid_definition",
        "/color",
        "/tasks/0/timeout_seconds",
    ),
    # Nesting: far too deep for any parser, and deeper than stored JSON may be.
    rejected("deep-10000-arrays", nested_arrays(10_000).encode(), "invalid_json"),
    rejected("deep-10000-objects", nested_objects(10_000).encode(), "invalid_json"),
    rejected(
        "deep-10000-arrays-in-input",
        with_input('{"x": ' + nested_arrays(10_000) + "}"),
        "invalid_json",
    ),
    rejected("deep-10000-objects-in-input", with_input(nested_objects(10_000)), "invalid_json"),
    rejected("deep-70-objects-in-input", with_input(nested_objects(70)), EITHER),
    rejected("deep-200-objects-in-input", with_input(nested_objects(200)), EITHER),
    *(rejected(f"not-utf8-{name}", body, "invalid_json") for name, body in NOT_UTF8.items()),
    *(
        rejected(f"nul-in-{name}", body, "invalid_definition", path)
        for name, (body, path) in NUL_STRINGS.items()
    ),
    *(rejected(f"surrogate-in-{name}", body, EITHER) for name, body in LONE_SURROGATES.items()),
    *(rejected(f"not-object-{name}", body, "invalid_json") for name, body in NOT_OBJECTS.items()),
    rejected("empty-body", b"", "invalid_json"),
    rejected("whitespace-body", b" \r\n\t ", "invalid_json"),
    *(
        rejected(
            f"content-type-{name}",
            VALID,
            "unsupported_media_type",
            status=415,
            headers={} if content_type is None else {"Content-Type": content_type},
        )
        for name, content_type in UNSUPPORTED_TYPES.items()
    ),
    # Over 1 MiB (declared; streamed without a length, and a length that lies: tests below).
    rejected(
        "size-2-mib",
        encode({**definition(), "description": "x" * (2 * MIB)}),
        "payload_too_large",
        status=413,
    ),
    rejected(
        "size-1-mib-plus-1",
        VALID + b" " * (MIB + 1 - len(VALID)),
        "payload_too_large",
        status=413,
    ),
)


@pytest.mark.parametrize(("body", "headers", "status", "code", "error_paths"), REJECTED_DEFINITIONS)
def test_definition_body_is_rejected_and_writes_nothing(
    live_api: LiveApi,
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str | set[str],
    error_paths: tuple[str, ...],
) -> None:
    create(live_api, definition("seed"))
    before = snapshot(live_api)
    response = live_api.operator.post(
        f"{V1}/workflows", content=body, headers={**headers, **idem()}
    )
    assert_problem(response, status, code, *error_paths)
    assert snapshot(live_api) == before, "the listings changed"


def test_chunked_definition_over_the_limit_is_rejected(live_api: LiveApi) -> None:
    """2 MiB streamed without a Content-Length."""
    create(live_api, definition("seed"))
    before = snapshot(live_api)

    def chunks() -> Iterator[bytes]:
        yield b'{"id": "victim", "description": "'
        for _ in range(32):
            yield b"y" * 65536
        yield b'", "tasks": [{"key": "a", "action": "mock"}]}'

    response = live_api.operator.post(
        f"{V1}/workflows", content=chunks(), headers={**JSON, **idem()}
    )
    assert_problem(response, 413, "payload_too_large")
    assert snapshot(live_api) == before, "the listings changed"


@pytest.mark.real_http_only  # raw bytes on a socket
@BOTH_PARSERS
def test_content_length_that_lies_big_is_rejected(live_api: LiveApi) -> None:
    """A Content-Length of 5,000,000 on a small body."""
    create(live_api, definition("seed"))
    before = snapshot(live_api)
    lying = raw_post(
        f"{V1}/workflows",
        {
            "Authorization": f"Bearer {OPERATOR_TOKEN}".encode(),
            "Content-Type": b"application/json",
            "Idempotency-Key": b"hostile-lying-length",
            "Content-Length": b"5000000",
        },
        VALID,
    )
    assert_problem(raw_exchange(live_api.base_url, lying), 413, "payload_too_large")
    assert snapshot(live_api) == before, "the listings changed"


def _exactly_one_mib() -> bytes:
    exact = encode(definition("exactly-one-mib"))
    exact += b" " * (MIB - len(exact))
    assert len(exact) == MIB
    return exact


@pytest.mark.parametrize(
    ("body", "content_type"),
    table(
        pytest.param(_exactly_one_mib(), "application/json", id="size-exactly-1-mib"),
        pytest.param(
            encode(definition("charset-utf8")),
            "application/json; charset=UTF-8",
            id="content-type-charset-utf-8",
        ),
        pytest.param(
            encode(definition("upper-case-type")),
            "Application/JSON",
            id="content-type-upper-case",
        ),
        pytest.param(
            with_input(nested_objects(30)).replace(b"victim", b"nested-30"),
            "application/json",
            id="deep-30-objects-in-input",
        ),
    ),
)
def test_definition_body_at_the_limits_is_accepted(
    live_api: LiveApi, body: bytes, content_type: str
) -> None:
    """Controls: what the rejections above must not catch."""
    response = live_api.operator.post(
        f"{V1}/workflows", content=body, headers={"Content-Type": content_type, **idem()}
    )
    assert_status(response, 201)


def test_non_ascii_input_is_accepted_and_stored_as_sent(live_api: LiveApi) -> None:
    """Control: non-ASCII keys and values in a task's input."""
    unicode_input = definition("unicode-input", input={"名前": "ü🙂\u202e", "emoji🙂": ["ok"]})
    response = live_api.operator.post(f"{V1}/workflows", json=unicode_input, headers=idem())
    assert_status(response, 201)
    stored = response.json()["definition"]["tasks"][0]["input"]
    assert stored == unicode_input["tasks"][0]["input"], "non-ASCII input not stored as sent"


# -- other bodies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Body:
    """What a write sends: raw ``content`` or a ``json`` value (or neither), and headers."""

    content: bytes | None = None
    content_type: str | None = None
    json: Any = None
    headers: tuple[tuple[str, str], ...] = ()


def raw(content: bytes, content_type: str | None = "application/json") -> Body:
    return Body(content=content, content_type=content_type)


def send_body(live: LiveApi, url: str, body: Body, method: str = "POST") -> httpx.Response:
    headers = dict(body.headers)
    if body.content_type is not None:
        headers["Content-Type"] = body.content_type
    headers.update(idem())
    if body.content is not None:
        return live.operator.request(method, url, content=body.content, headers=headers)
    if body.json is not None:
        return live.operator.request(method, url, json=body.json, headers=headers)
    return live.operator.request(method, url, headers=headers)


@dataclass(frozen=True)
class Targets:
    """The seeded workflow ``seed``, and a running run of the slow workflow ``slow``."""

    slow_run: str

    def url(self, target: str) -> str:
        return {
            "version": f"{V1}/workflows/seed/versions",
            "apply": f"{V1}/workflows/seed",
            "run": f"{V1}/workflows/seed/versions/1/runs",
            "cancel": f"{V1}/runs/{self.slow_run}/cancel",
        }[target]

    @staticmethod
    def method(target: str) -> str:
        return "PUT" if target == "apply" else "POST"


def seed_targets(live: LiveApi) -> Targets:
    create(live, definition("seed"))
    create(live, definition("slow", input={"sleep_ms": 60_000}))
    return Targets(start(live, "slow")["run_id"])


def without_id(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != "id"}


def body_rejected(
    case_id: str,
    target: str,
    body: Body,
    code: str | set[str],
    error_path: str | None = None,
    status: int = 400,
) -> ParameterSet:
    return pytest.param(target, body, status, code, error_path, id=case_id)


OTHER_IDS = {"other": "other", "upper-case": "Seed", "suffix": "seed-2", "trailing-space": "seed "}
RUN_BODIES: dict[str, tuple[bytes, str | set[str]]] = {
    "unknown-field": (encode({"input": {}, "priority": 1}), "invalid_argument"),
    "unknown-field-only": (encode({"inputs": {}}), "invalid_argument"),
    "input-list": (encode({"input": []}), "invalid_argument"),
    "input-string": (encode({"input": "x"}), "invalid_argument"),
    "input-number": (encode({"input": 3}), "invalid_argument"),
    "input-null": (encode({"input": None}), "invalid_argument"),
    "nul-in-input-value": (encode({"input": {"x": "\u0000"}}), "invalid_argument"),
    "nul-in-input-key": (encode({"input": {"\u0000": 1}}), "invalid_argument"),
    "nul-nested": (encode({"input": {"a": [{"b": "c\u0000"}]}}), "invalid_argument"),
    "surrogate-value": (b'{"input": {"x": "\\ud800"}}', {"invalid_argument", "invalid_json"}),
    "surrogate-key": (b'{"input": {"\\udfff": 1}}', {"invalid_argument", "invalid_json"}),
    "too-deep": (
        ('{"input": ' + nested_objects(80) + "}").encode(),
        {"invalid_argument", "invalid_json"},
    ),
    "malformed": (b'{"input": {', "invalid_json"),
    "duplicate-key": (b'{"input": {}, "input": {}}', "invalid_json"),
    "duplicate-nested-key": (b'{"input": {"a": 1, "a": 1}}', "invalid_json"),
    "nan": (b'{"input": {"a": NaN}}', "invalid_json"),
    "array": (b"[]", "invalid_json"),
    "null": (b"null", "invalid_json"),
    "not-utf8": (b'{"input": {"a": "\xff"}}', "invalid_json"),
}
IF_MATCHES = {
    "garbage": "garbage",
    "not-a-number": '"abc"',
    "negative": '"-1"',
    "huge": '"99999999999999999999"',
    "weak": 'W/"0"',
    "list": '"0", "x"',
}


def _first(items: Mapping[str, Any], count: int, start_at: int = 0) -> list[tuple[str, Any]]:
    return list(items.items())[start_at : start_at + count]


def definition_bodies_rejected(target: str) -> tuple[ParameterSet, ...]:
    """The bodies a definition under the path's workflow refuses: POST …/versions, and PUT."""
    return (
        *(
            body_rejected(
                f"{target}-id-{name}",
                target,
                Body(json=definition(other_id)),
                "workflow_id_mismatch",
            )
            for name, other_id in OTHER_IDS.items()
        ),
        *(
            body_rejected(f"{target}-json-{name}", target, raw(content), "invalid_json")
            for name, content in _first(MALFORMED_JSON, 6)
        ),
        *(
            body_rejected(f"{target}-duplicate-key-{name}", target, raw(content), "invalid_json")
            for name, content in _first(DUPLICATE_KEYS, 2, start_at=1)
        ),
        *(
            body_rejected(f"{target}-non-finite-{name}", target, raw(content), "invalid_json")
            for name, content in _first(NON_FINITE, 2)
        ),
        *(
            body_rejected(
                f"{target}-wrong-type-{name}",
                target,
                Body(json=without_id(value)),
                "invalid_definition",
                path,
            )
            for name, (value, path) in _first(WRONG_TYPES, 4)
        ),
        *(
            body_rejected(
                f"{target}-unknown-field-{name}",
                target,
                Body(json=without_id(value)),
                "invalid_definition",
                path,
            )
            for name, (value, path) in UNKNOWN_FIELDS.items()
        ),
        body_rejected(
            f"{target}-content-type-text-plain",
            target,
            raw(encode(definition("seed")), "text/plain"),
            "unsupported_media_type",
            status=415,
        ),
        body_rejected(
            f"{target}-size-2-mib",
            target,
            raw(encode({"tasks": [{"key": "a", "action": "mock"}], "description": "z" * 2 * MIB})),
            "payload_too_large",
            status=413,
        ),
    )


REJECTED_BODIES = table(
    # POST /workflows/seed/versions, and PUT /workflows/seed (an apply, SPEC §6)
    *definition_bodies_rejected("version"),
    *definition_bodies_rejected("apply"),
    # POST /workflows/seed/versions/1/runs
    *(
        body_rejected(f"run-{name}", "run", raw(content), code)
        for name, (content, code) in RUN_BODIES.items()
    ),
    body_rejected(
        "run-content-type-text-plain",
        "run",
        raw(b'{"input": {}}', "text/plain"),
        "unsupported_media_type",
        status=415,
    ),
    body_rejected(
        "run-content-type-charset-latin-1",
        "run",
        raw(b'{"input": {}}', "application/json; charset=latin-1"),
        "unsupported_media_type",
        status=415,
    ),
    *(
        body_rejected(
            f"run-content-encoding-{coding}",
            "run",
            Body(
                content=b'{"input": {}}',
                content_type="application/json",
                headers=(("Content-Encoding", coding),),
            ),
            "unsupported_media_type",
            status=415,
        )
        for coding in ("gzip", "br", "deflate, gzip", "x-unknown")
    ),
    body_rejected(
        "run-content-type-missing",
        "run",
        raw(b'{"input": {}}', None),
        "unsupported_media_type",
        status=415,
    ),
    body_rejected(
        "run-size-2-mib",
        "run",
        raw(encode({"input": {"pad": "p" * 2 * MIB}})),
        "payload_too_large",
        status=413,
    ),
    # POST /runs/{run_id}/cancel
    body_rejected("cancel-field", "cancel", raw(encode({"reason": "x"})), "invalid_argument"),
    body_rejected("cancel-malformed", "cancel", raw(b"{"), "invalid_json"),
    body_rejected("cancel-array", "cancel", raw(b"[]"), "invalid_json"),
    body_rejected(
        "cancel-content-type-text-plain",
        "cancel",
        raw(b"{}", "text/plain"),
        "unsupported_media_type",
        status=415,
    ),
    *(
        body_rejected(
            f"cancel-if-match-{name}",
            "cancel",
            Body(headers=(("If-Match", if_match),)),
            "precondition_failed",
            status=412,
        )
        for name, if_match in IF_MATCHES.items()
    ),
)


@pytest.mark.parametrize(("target", "body", "status", "code", "error_path"), REJECTED_BODIES)
def test_version_run_and_cancel_body_is_rejected_and_writes_nothing(
    live_api: LiveApi,
    target: str,
    body: Body,
    status: int,
    code: str | set[str],
    error_path: str | None,
) -> None:
    targets = seed_targets(live_api)
    before = snapshot(live_api)
    response = send_body(live_api, targets.url(target), body, Targets.method(target))
    assert_problem(response, status, code, *([] if error_path is None else [error_path]))
    after = snapshot(live_api)
    assert after == before, f"the listings changed: {before} -> {after}"
    run = live_api.viewer.get(f"{V1}/runs/{targets.slow_run}").json()
    assert run["cancel_requested"] is False, f"a cancel was recorded: {run}"
    assert run["status"] != "canceled", f"the run was canceled: {run}"


@pytest.mark.parametrize(
    ("target", "body", "status", "version"),
    table(
        pytest.param(
            "version",
            Body(json={"tasks": [{"key": "b", "action": "mock"}]}),
            201,
            2,
            id="version-without-id",
        ),
        pytest.param("version", Body(json=definition("seed")), 201, None, id="version-path-id"),
        pytest.param(
            "apply",
            Body(json={"tasks": [{"key": "b", "action": "mock"}]}),
            201,
            2,
            id="apply-without-id",
        ),
        pytest.param("apply", Body(json=definition("seed")), 200, 1, id="apply-unchanged"),
        pytest.param("run", Body(), 202, None, id="run-no-body-no-content-type"),
        pytest.param("run", Body(json={}), 202, None, id="run-empty-object"),
        pytest.param(
            "run", Body(json={"input": {"k": [1, {"x": None}]}}), 202, None, id="run-with-input"
        ),
        pytest.param("cancel", Body(), 202, None, id="cancel-no-body-no-content-type"),
    ),
)
def test_version_run_and_cancel_body_is_accepted(
    live_api: LiveApi, target: str, body: Body, status: int, version: int | None
) -> None:
    """Controls: the bodies that are allowed."""
    targets = seed_targets(live_api)
    response = send_body(live_api, targets.url(target), body, Targets.method(target))
    assert_status(response, status)
    if version is not None:
        assert response.json()["version"] == version, response.json()


# -- Idempotency-Key ---------------------------------------------------------------------------

KEYED_WRITES: dict[str, tuple[str, Any]] = {
    "create-workflow": (f"{V1}/workflows", definition()),
    "create-version": (f"{V1}/workflows/seed/versions", definition("seed")),
    "start-run": (f"{V1}/workflows/seed/versions/1/runs", {}),
    "cancel-run": (f"{V1}/runs/{{run_id}}/cancel", None),
}
BAD_KEYS: dict[str, bytes] = {
    "empty": b"",
    "256-chars": b"k" * 256,
    "1000-chars": b"k" * 1000,
    "inner-space": b"a b",
    "inner-tab": b"a\tb",
    "non-ascii": "clé-🙂".encode(),
    "latin-1-byte": b"key\xe9",
    "sql": b"' OR 1=1 --",
}


def seed_keyed(live: LiveApi) -> str:
    """The workflow ``seed`` and a run of it; the run's id."""
    create(live, definition("seed"))
    run_id: str = start(live, "seed")["run_id"]
    return run_id


@pytest.mark.parametrize(
    ("write", "key", "code"),
    table(
        *(
            pytest.param(write, None, "idempotency_key_required", id=f"{write}-no-key")
            for write in KEYED_WRITES
        ),
        *(
            pytest.param(write, b"has space", "invalid_argument", id=f"{write}-key-with-space")
            for write in KEYED_WRITES
        ),
        *(
            pytest.param("create-workflow", key, "invalid_argument", id=f"key-{name}")
            for name, key in BAD_KEYS.items()
        ),
    ),
)
def test_idempotency_key_is_required_and_validated(
    live_api: LiveApi, write: str, key: bytes | None, code: str
) -> None:
    run_id = seed_keyed(live_api)
    before = snapshot(live_api)
    path, body = KEYED_WRITES[write]
    headers = {} if key is None else {b"Idempotency-Key": key}
    response = live_api.operator.post(path.replace("{run_id}", run_id), json=body, headers=headers)
    assert_problem(response, 400, code)
    assert snapshot(live_api) == before, "the listings changed"


@pytest.mark.real_http_only  # raw bytes on a socket
@BOTH_PARSERS
@pytest.mark.parametrize(
    "key",
    table(
        pytest.param(b"key\x7f", id="key-control-del"),
        pytest.param(b"key\x01x", id="key-control-01"),
        pytest.param(b"\x1fkey", id="key-control-1f"),
    ),
)
def test_idempotency_key_with_a_control_character_is_rejected(
    live_api: LiveApi, key: bytes
) -> None:
    """Control characters: httpx will not send them, so they go raw."""
    seed_keyed(live_api)
    before = snapshot(live_api)
    body = encode(definition())
    request = raw_post(
        f"{V1}/workflows",
        {
            "Authorization": f"Bearer {OPERATOR_TOKEN}".encode(),
            "Content-Type": b"application/json",
            "Idempotency-Key": key,
            "Content-Length": str(len(body)).encode(),
        },
        body,
    )
    response = raw_exchange(live_api.base_url, request)
    # Whether the HTTP server refuses a control character before the app sees it or the app
    # does, the answer is an invalid_argument problem with a request id; nothing is written.
    assert_problem(response, 400, "invalid_argument")
    assert snapshot(live_api) == before, "the listings changed"


READ_HEADERS = b"Host: 127.0.0.1\r\nAuthorization: Bearer " + OPERATOR_TOKEN.encode()


@pytest.mark.real_http_only  # raw bytes on a socket
@BOTH_PARSERS
@pytest.mark.parametrize(
    "request_bytes",
    table(
        pytest.param(b"GET /api/v1/runs/\xff HTTP/1.1\r\n" + READ_HEADERS, id="path-byte-ff"),
        pytest.param(b"GET /api/v1/runs?status=\xff HTTP/1.1\r\n" + READ_HEADERS, id="query-ff"),
        pytest.param(
            b"GET /api/v1/runs HTTP/1.1\r\n" + READ_HEADERS + b"\r\nno colon", id="header"
        ),
        pytest.param(
            b"POST /api/v1/workflows HTTP/1.1\r\n" + READ_HEADERS + b"\r\nContent-Length: -1",
            id="content-length-negative",
        ),
        pytest.param(
            b"POST /api/v1/workflows HTTP/1.1\r\n" + READ_HEADERS + b"\r\nContent-Length: 1x",
            id="content-length-not-a-number",
        ),
        pytest.param(
            b"GET /api/v1/runs HTTP/1.1\r\n" + READ_HEADERS + b"\r\nBad Name: x", id="header-name"
        ),
        pytest.param(b"GET\r\n" + READ_HEADERS, id="request-line"),
    ),
)
def test_a_request_that_is_not_http_is_a_problem(live_api: LiveApi, request_bytes: bytes) -> None:
    """The HTTP server refuses these before the app: still a problem with a request id."""
    response = raw_exchange(live_api.base_url, request_bytes + b"\r\n\r\n")
    assert_problem(response, 400, "invalid_argument")
    assert response.headers.get("connection") == "close"
    assert_status(live_api.viewer.get(f"{V1}/runs"), 200)  # the server serves on


def test_idempotency_key_of_255_visible_characters_is_accepted_and_replayed(
    live_api: LiveApi,
) -> None:
    """Control: the longest key, of every visible ASCII character."""
    visible = "".join(chr(c) for c in range(0x21, 0x7F))
    key = (visible * 3)[:255]
    url = f"{V1}/workflows"
    response = live_api.operator.post(
        url, json=definition("max-key"), headers={"Idempotency-Key": key}
    )
    assert_status(response, 201)
    replay = live_api.operator.post(
        url, json=definition("max-key"), headers={"Idempotency-Key": key}
    )
    assert_status(replay, 201)
    assert replay.headers.get("idempotent-replayed") == "true", replay.headers
    assert replay.json() == response.json(), "the replay is not the original"


# -- query parameters --------------------------------------------------------------------------

LISTINGS = ("workflows", "versions", "runs", "tasks", "attempts", "events")
# Listings that need the two runs of ``seed`` (run A and run B).
RUN_LISTINGS = {
    "runs",
    "tasks",
    "attempts",
    "events",
    "tasks-of-run-b",
    "attempts-of-run-b",
    "attempts-of-task-b",
    "events-of-run-b",
}


def listing_paths(run_a: str | None, run_b: str | None) -> dict[str, str]:
    paths = {
        "workflows": f"{V1}/workflows",
        "versions": f"{V1}/workflows/seed/versions",
        "versions-of-other": f"{V1}/workflows/other/versions",
    }
    if run_a is not None and run_b is not None:
        paths |= {
            "runs": f"{V1}/runs",
            "tasks": f"{V1}/runs/{run_a}/tasks",
            "attempts": f"{V1}/runs/{run_a}/tasks/a/attempts",
            "events": f"{V1}/runs/{run_a}/events",
            "tasks-of-run-b": f"{V1}/runs/{run_b}/tasks",
            "attempts-of-run-b": f"{V1}/runs/{run_b}/tasks/a/attempts",
            "attempts-of-task-b": f"{V1}/runs/{run_a}/tasks/b/attempts",
            "events-of-run-b": f"{V1}/runs/{run_b}/events",
        }
    return paths


def seed_listings(live: LiveApi, *, with_runs: bool) -> dict[str, str]:
    """Two versions of ``seed`` (two tasks, ``a`` retried once), ``other``, and, if asked, two
    finished runs of ``seed``: every listing has a second page at ``limit=1``."""
    create(
        live,
        {
            "id": "seed",
            "tasks": [
                {
                    "key": "a",
                    "action": "mock",
                    "input": {"fail_first": 1},
                    "retry": {"max_attempts": 2, "initial_backoff_seconds": 0},
                },
                {"key": "b", "action": "mock", "depends_on": ["a"]},
            ],
        },
    )
    version = live.operator.post(
        f"{V1}/workflows/seed/versions", json=definition("seed"), headers=idem()
    )
    assert version.status_code == 201, version.text
    create(live, definition("other"))
    if not with_runs:
        return listing_paths(None, None)
    run_a = live.wait_for_run(start(live, "seed")["run_id"])["run_id"]
    run_b = live.wait_for_run(start(live, "seed")["run_id"])["run_id"]
    return listing_paths(run_a, run_b)


def truncated(cursor: str) -> str:
    return cursor[:-4]


def halved(cursor: str) -> str:
    return cursor[: len(cursor) // 2]


def tampered(cursor: str) -> str:
    return cursor[:10] + ("A" if cursor[10] != "A" else "B") + cursor[11:]


def tampered_at_the_end(cursor: str) -> str:
    return cursor[:-1] + ("A" if cursor[-1] != "A" else "B")


def doubled(cursor: str) -> str:
    return cursor + cursor


def standard_base64(cursor: str) -> str:
    return cursor.replace("-", "+").replace("_", "/") + "+/"


@dataclass(frozen=True)
class Cursor:
    """A real cursor: ``next_cursor`` of ``listing`` at ``limit=1`` with ``filters``, changed."""

    listing: str
    filters: tuple[tuple[str, str], ...] = ()
    change: Callable[[str], str] | None = None


@dataclass(frozen=True)
class Query:
    """GET ``listing`` with ``params``: a problem with ``code``, or 200 when ``code`` is None."""

    listing: str
    params: tuple[tuple[str, str | Cursor], ...]
    code: str | None = "invalid_argument"
    has_next_page: bool = False

    def needs_runs(self) -> bool:
        cursors = [v.listing for _, v in self.params if isinstance(v, Cursor)]
        return any(name in RUN_LISTINGS for name in (self.listing, *cursors))


BAD_LIMITS = {
    "zero": "0",
    "negative": "-1",
    "201": "201",
    "huge": "999999999999",
    "fraction": "1.5",
    "exponent": "1e2",
    "letters": "abc",
    "empty": "",
    "leading-space": " 5",
    "plus-sign": "+5",
    "hex": "0x10",
    "arabic-digit": "٣",
}
GARBAGE_CURSORS = {
    "empty": "",
    "letters": "abc",
    "bangs": "!!!",
    "percent-00": "%00",
    "nul": "\u0000",
    "aaaa": "AAAA",
    "e-acute": "é",
    "2000-chars": "x" * 2000,
    "padding": "=" * 40,
    "null": "null",
}
BROKEN_CURSORS: dict[str, Callable[[str], str]] = {
    "truncated": truncated,
    "half": halved,
    "tampered": tampered,
    "tampered-at-the-end": tampered_at_the_end,
    "doubled": doubled,
    "standard-base64": standard_base64,
}


def query(case_id: str, listing: str, *params: tuple[str, str | Cursor], **kw: Any) -> ParameterSet:
    return pytest.param(Query(listing, params, **kw), id=case_id)


def every_listing(name: str) -> Iterator[ParameterSet]:
    """The checks that every listing gets."""
    own = Cursor(name)
    yield query(f"{name}-limit-1", name, ("limit", "1"), code=None, has_next_page=True)
    yield query(f"{name}-next-page", name, ("limit", "1"), ("cursor", own), code=None)
    yield query(f"{name}-next-page-default-limit", name, ("cursor", own), code=None)
    yield query(f"{name}-limit-200", name, ("limit", "200"), code=None)
    for label, limit in BAD_LIMITS.items():
        yield query(f"{name}-limit-{label}", name, ("limit", limit))
    yield query(f"{name}-limit-repeated", name, ("limit", "1"), ("limit", "2"))
    yield query(f"{name}-limit-repeated-equal", name, ("limit", "5"), ("limit", "5"))
    yield query(f"{name}-unknown-param", name, ("sort", "desc"))
    yield query(f"{name}-unknown-param-empty", name, ("offset", ""))
    for label, garbage in GARBAGE_CURSORS.items():
        yield query(f"{name}-cursor-{label}", name, ("cursor", garbage), code="invalid_cursor")
    yield query(f"{name}-cursor-repeated", name, ("cursor", own), ("cursor", own))
    for label, change in BROKEN_CURSORS.items():
        yield query(
            f"{name}-cursor-{label}",
            name,
            ("cursor", Cursor(name, change=change)),
            code="invalid_cursor",
        )


RUNS_CURSOR = Cursor("runs")
FILTERED_RUNS_CURSOR = Cursor("runs", (("workflow_id", "seed"),))

QUERIES = table(
    *(case for name in LISTINGS for case in every_listing(name)),
    *(
        query(f"runs-status-{label}", "runs", ("status", status))
        for label, status in {
            "done": "done",
            "upper-case": "SUCCEEDED",
            "trailing-space": "succeeded ",
            "empty": "",
            "list": "running,failed",
            "zero": "0",
        }.items()
    ),
    query("runs-status-repeated", "runs", ("status", "running"), ("status", "failed")),
    *(
        query(f"runs-workflow-id-{label}", "runs", ("workflow_id", workflow_id))
        for label, workflow_id in {
            "empty": "",
            "upper-case": "UPPER",
            "leading-dash": "-x",
            "64-chars": "a" * 64,
            "slash": "a/b",
        }.items()
    ),
    query("runs-status-filter", "runs", ("status", "succeeded"), code=None),
    query("runs-workflow-id-unknown", "runs", ("workflow_id", "nope"), code=None),
    # A real cursor replayed on another listing, or with other filters.
    *(
        query(f"runs-cursor-on-{name}", name, ("cursor", RUNS_CURSOR), code="invalid_cursor")
        for name in ("events", "tasks", "attempts", "workflows", "versions")
    ),
    query(
        "runs-cursor-with-status",
        "runs",
        ("cursor", RUNS_CURSOR),
        ("status", "succeeded"),
        code="invalid_cursor",
    ),
    query(
        "runs-cursor-with-workflow-id",
        "runs",
        ("cursor", RUNS_CURSOR),
        ("workflow_id", "seed"),
        code="invalid_cursor",
    ),
    query(
        "filtered-runs-cursor-without-filter",
        "runs",
        ("cursor", FILTERED_RUNS_CURSOR),
        code="invalid_cursor",
    ),
    query(
        "filtered-runs-cursor-other-workflow",
        "runs",
        ("cursor", FILTERED_RUNS_CURSOR),
        ("workflow_id", "other"),
        code="invalid_cursor",
    ),
    query(
        "filtered-runs-cursor-with-status",
        "runs",
        ("cursor", FILTERED_RUNS_CURSOR),
        ("workflow_id", "seed"),
        ("status", "failed"),
        code="invalid_cursor",
    ),
    query(
        "events-cursor-on-run-b",
        "events-of-run-b",
        ("cursor", Cursor("events")),
        code="invalid_cursor",
    ),
    query("events-cursor-on-tasks", "tasks", ("cursor", Cursor("events")), code="invalid_cursor"),
    query("events-cursor-on-runs", "runs", ("cursor", Cursor("events")), code="invalid_cursor"),
    query("tasks-cursor-on-events", "events", ("cursor", Cursor("tasks")), code="invalid_cursor"),
    query(
        "tasks-cursor-on-run-b",
        "tasks-of-run-b",
        ("cursor", Cursor("tasks")),
        code="invalid_cursor",
    ),
    query(
        "attempts-cursor-on-run-b",
        "attempts-of-run-b",
        ("cursor", Cursor("attempts")),
        code="invalid_cursor",
    ),
    query(
        "attempts-cursor-on-task-b",
        "attempts-of-task-b",
        ("cursor", Cursor("attempts")),
        code="invalid_cursor",
    ),
    query(
        "versions-cursor-on-other-workflow",
        "versions-of-other",
        ("cursor", Cursor("versions")),
        code="invalid_cursor",
    ),
    query(
        "workflows-cursor-on-versions",
        "versions",
        ("cursor", Cursor("workflows")),
        code="invalid_cursor",
    ),
)


def resolve_cursor(live: LiveApi, paths: Mapping[str, str], cursor: Cursor) -> str:
    """The real cursor's value: the second page of its listing at ``limit=1``, as changed."""
    first = live.viewer.get(paths[cursor.listing], params=[("limit", "1"), *cursor.filters])
    assert first.status_code == 200, first.text
    value = first.json().get("next_cursor")
    assert isinstance(value, str), f"{cursor.listing} has no second page: {first.text[:200]}"
    return value if cursor.change is None else cursor.change(value)


@pytest.mark.parametrize("case", QUERIES)
def test_query_parameters_on_every_listing(live_api: LiveApi, case: Query) -> None:
    paths = seed_listings(live_api, with_runs=case.needs_runs())
    values: dict[Cursor, str] = {}  # a cursor named twice is the same value twice
    params: list[tuple[str, str]] = []
    for name, value in case.params:
        if isinstance(value, Cursor):
            if value not in values:
                values[value] = resolve_cursor(live_api, paths, value)
            params.append((name, values[value]))
        else:
            params.append((name, value))
    before = snapshot(live_api)
    response = live_api.viewer.get(paths[case.listing], params=tuple(params))
    if case.code is None:
        assert_status(response, 200)
        if case.has_next_page:
            cursor = response.json().get("next_cursor")
            assert isinstance(cursor, str), f"no second page: {response.text[:200]}"
    else:
        assert_problem(response, 400, case.code)
    assert snapshot(live_api) == before, "the listings changed"


# -- hostile strings in paths and queries ------------------------------------------------------

HOSTILE = {
    "sql-or": "' OR 1=1 --",
    "sql-drop": "1; DROP TABLE workflows; --",
    "sql-quotes": '" OR ""="',
    "sql-union": "') UNION SELECT * FROM workflow_runs --",
    "dollar-1": "$1",
    "percent-s": "%s",
    "braces": "{}",
    "star": "*",
    "null": "null",
    "minus-1": "-1",
    "zero": "0",
    "huge-number": "99999999999999999999",
    "uuid-quote": "00000000-0000-0000-0000-000000000000'",
    "unicode-rtl": "ü名前🙂\u202e",
    "5000-chars": "a" * 5000,
    "1000-e-acute": "é" * 1000,
    "nul": "\u0000",
    "replacement-char": "\ufffd",
    "tab": "\t",
    "trailing-newline": "1\n",
}
# Already percent-encoded: sent as they are.
HOSTILE_RAW = {
    "raw-nul": "%00",
    "raw-double-encoded": "%2500",
    "raw-traversal": "..%2F..%2Fetc%2Fpasswd",
    "raw-surrogate": "%ED%A0%80",
    "raw-ff-fe": "%FF%FE",
    "raw-overlong-slash": "%C0%AF",
    "raw-dot-dot": "%2E%2E",
}
MISSING_RUN = "018f0000-0000-7000-8000-000000000000"


def segments() -> Iterator[tuple[str, str]]:
    """(label, path segment) pairs, percent-encoded for the URL."""
    for label, value in HOSTILE.items():
        yield label, quote(value, safe="")
    yield from HOSTILE_RAW.items()


@dataclass(frozen=True)
class Probe:
    """One hostile request: GET by the viewer or POST by the operator; ``{run_id}`` in ``path``
    is the seeded run."""

    method: str
    path: str
    status: int
    codes: frozenset[str]
    params: tuple[tuple[str, str], ...] | None = None
    json: Any = None


# (id, method, path with {seg}, code)
SEGMENT_ROUTES = [
    ("get-workflow", "GET", f"{V1}/workflows/{{seg}}", "workflow_not_found"),
    ("get-versions", "GET", f"{V1}/workflows/{{seg}}/versions", "workflow_not_found"),
    ("get-version", "GET", f"{V1}/workflows/{{seg}}/versions/1", "workflow_not_found"),
    ("get-version-number", "GET", f"{V1}/workflows/seed/versions/{{seg}}", "version_not_found"),
    ("post-version", "POST", f"{V1}/workflows/{{seg}}/versions", "workflow_not_found"),
    ("post-run", "POST", f"{V1}/workflows/{{seg}}/versions/1/runs", "workflow_not_found"),
    (
        "post-run-version-number",
        "POST",
        f"{V1}/workflows/seed/versions/{{seg}}/runs",
        "version_not_found",
    ),
    ("get-run", "GET", f"{V1}/runs/{{seg}}", "run_not_found"),
    ("post-cancel", "POST", f"{V1}/runs/{{seg}}/cancel", "run_not_found"),
    ("get-tasks", "GET", f"{V1}/runs/{{seg}}/tasks", "run_not_found"),
    ("get-events", "GET", f"{V1}/runs/{{seg}}/events", "run_not_found"),
    ("get-task-key", "GET", f"{V1}/runs/{{run_id}}/tasks/{{seg}}", "task_not_found"),
    (
        "get-attempts-task-key",
        "GET",
        f"{V1}/runs/{{run_id}}/tasks/{{seg}}/attempts",
        "task_not_found",
    ),
    ("get-task-run", "GET", f"{V1}/runs/{{seg}}/tasks/a", "run_not_found"),
    ("get-attempts-run", "GET", f"{V1}/runs/{{seg}}/tasks/a/attempts", "run_not_found"),
]


def segment_probe(method: str, template: str, code: str, seg: str) -> Probe:
    # A segment that decodes to a slash or a dot segment may match no route at all.
    codes = {code, "not_found"} if seg == "%2E%2E" or "%2F" in seg else {code}
    body = (
        {"tasks": [{"key": "a", "action": "mock"}]}
        if method == "POST" and template.endswith("/versions")
        else None
    )
    return Probe(method, template.replace("{seg}", seg), 404, frozenset(codes), json=body)


PATH_SEGMENTS = table(
    *(
        pytest.param(segment_probe(method, template, code, seg), id=f"{route}-{label}")
        for route, method, template, code in SEGMENT_ROUTES
        for label, seg in segments()
    ),
)

# An id holding an escaped "/" names nothing: the server decodes the path before routing, and
# must not let such an id reach the route its decoded path spells (a write above all).
ENCODED_SLASHES = table(
    *(
        pytest.param(Probe(method, path, 404, frozenset({"not_found"}), json=body), id=label)
        for label, method, path, body in (
            ("get-versions", "GET", f"{V1}/workflows/seed%2Fversions", None),
            ("get-version-lower", "GET", f"{V1}/workflows/seed%2fversions%2f1", None),
            ("get-tasks", "GET", f"{V1}/runs/{{run_id}}%2Ftasks", None),
            ("get-task", "GET", f"{V1}/runs/{{run_id}}/tasks/a%2Fattempts", None),
            (
                "post-version",
                "POST",
                f"{V1}/workflows/seed%2Fversions",
                {"tasks": [{"key": "a", "action": "mock"}]},
            ),
            ("post-run", "POST", f"{V1}/workflows/seed%2Fversions%2F1%2Fruns", None),
            ("post-cancel", "POST", f"{V1}/runs/{{run_id}}%2Fcancel", None),
        )
    ),
)

# Under a run that does not exist, any task key is the run's 404 (as a version path under a
# missing workflow is workflow_not_found, SPEC §6), whatever the key looks like.
MISSING_RUN_KEYS = {
    "a": "a",
    "missing": "zz-missing",
    "sql-or": quote("' OR 1=1 --", safe=""),
    "raw-nul": "%00",
    "5000-chars": "b" * 5000,
}
MISSING_RUN_TASKS = table(
    *(
        pytest.param(
            Probe(
                "GET",
                f"{V1}/runs/{MISSING_RUN}/tasks/{key}{suffix}",
                404,
                frozenset({"run_not_found"}),
            ),
            id=f"get-{what}-missing-run-{label}",
        )
        for what, suffix in (("task", ""), ("attempts", "/attempts"))
        for label, key in MISSING_RUN_KEYS.items()
    ),
)


def query_probe(path: str, code: str, params: tuple[tuple[str, str], ...] | None = None) -> Probe:
    return Probe("GET", path, 400, frozenset({code}), params=params)


QUERY_LISTINGS = {
    "workflows": f"{V1}/workflows",
    "runs": f"{V1}/runs",
    "events": f"{V1}/runs/{{run_id}}/events",
}
RAW_QUERY_FIELDS = {
    "limit": "limit={raw}",
    "cursor": "cursor={raw}",
    "status": "status={raw}",
    "workflow-id": "workflow_id={raw}",
    "name": "{raw}=1",
}

HOSTILE_QUERIES = table(
    *(
        case
        for label, value in HOSTILE.items()
        for name, path in QUERY_LISTINGS.items()
        for case in (
            pytest.param(
                query_probe(path, "invalid_argument", (("limit", value),)),
                id=f"{name}-limit-{label}",
            ),
            pytest.param(
                query_probe(path, "invalid_cursor", (("cursor", value),)),
                id=f"{name}-cursor-{label}",
            ),
            pytest.param(
                query_probe(path, "invalid_argument", ((value, "1"),)),
                id=f"{name}-param-named-{label}",
            ),
        )
    ),
    *(
        pytest.param(
            query_probe(f"{V1}/runs", "invalid_argument", (("status", value),)),
            id=f"runs-status-{label}",
        )
        for label, value in HOSTILE.items()
    ),
    *(
        pytest.param(
            query_probe(f"{V1}/runs", "invalid_argument", (("workflow_id", value),)),
            id=f"runs-workflow-id-{label}",
        )
        for label, value in HOSTILE.items()
        if not WORKFLOW_ID.fullmatch(value)
    ),
    *(
        pytest.param(
            query_probe(
                f"{V1}/runs?{template.replace('{raw}', raw_value)}",
                "invalid_cursor" if field == "cursor" else "invalid_argument",
            ),
            id=f"runs-{field}-{label}",
        )
        for label, raw_value in HOSTILE_RAW.items()
        for field, template in RAW_QUERY_FIELDS.items()
    ),
    pytest.param(
        query_probe(f"{V1}/runs?" + "&".join(f"p{i}=1" for i in range(500)), "invalid_argument"),
        id="runs-500-unknown-params",
    ),
    pytest.param(
        query_probe(f"{V1}/runs?" + "&".join("limit=1" for _ in range(500)), "invalid_argument"),
        id="runs-500-limits",
    ),
)


def check_probe(live: LiveApi, probe: Probe) -> None:
    """Send ``probe`` to an API holding a finished run of ``seed``: the right problem, the
    database intact (the same listings and resources), and writes still work."""
    create(live, definition("seed"))
    run_id = live.wait_for_run(start(live, "seed")["run_id"])["run_id"]
    before = snapshot(live)
    details = [
        f"{V1}/workflows/seed",
        f"{V1}/workflows/seed/versions/1",
        f"{V1}/runs/{run_id}",
        f"{V1}/runs/{run_id}/tasks",
        f"{V1}/runs/{run_id}/events",
    ]
    detail_before = {path: live.viewer.get(path).json() for path in details}

    path = probe.path.replace("{run_id}", run_id)
    if probe.method == "GET":
        response = live.viewer.get(path, params=probe.params)
    else:
        response = live.operator.post(path, json=probe.json, headers=idem())
    assert_problem(response, probe.status, set(probe.codes))

    assert snapshot(live) == before, "the listings changed"
    for detail, body in detail_before.items():
        assert live.viewer.get(detail).json() == body, f"{detail} changed"
    after = live.operator.post(
        f"{V1}/workflows", json=definition("after-the-storm"), headers=idem()
    )
    assert_status(after, 201)


@pytest.mark.parametrize("probe", PATH_SEGMENTS)
def test_hostile_path_segment(live_api: LiveApi, probe: Probe) -> None:
    check_probe(live_api, probe)


@pytest.mark.parametrize("probe", MISSING_RUN_TASKS)
def test_task_key_under_a_missing_run(live_api: LiveApi, probe: Probe) -> None:
    check_probe(live_api, probe)


@pytest.mark.parametrize("probe", ENCODED_SLASHES)
def test_an_escaped_slash_reaches_no_other_route(live_api: LiveApi, probe: Probe) -> None:
    check_probe(live_api, probe)


@pytest.mark.parametrize("probe", HOSTILE_QUERIES)
def test_hostile_query_string(live_api: LiveApi, probe: Probe) -> None:
    check_probe(live_api, probe)

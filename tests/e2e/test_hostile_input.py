"""Hostile input on every path into the live API (SPEC §6).

Every malformed, oversized, mistyped or malicious input gets the right 4xx problem (never a 5xx)
and writes nothing: each test lists workflows, versions and runs before and after.

Checks inside a test are collected rather than stopped at the first failure, so one run reports
every wrong answer at once.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.plugins.live_api import OPERATOR_TOKEN, LiveApi

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


class Findings:
    """Collects every failed check of a test; :meth:`done` fails the test with all of them."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def problem(
        self,
        label: str,
        response: httpx.Response,
        status: int,
        code: str | set[str],
        error_path: str | None = None,
    ) -> None:
        wrong = problem_failures(response, status, code, error_path)
        if wrong:
            self.failures.append(f"{label}: " + "; ".join(wrong))

    def status(self, label: str, response: httpx.Response, status: int) -> None:
        if response.status_code != status:
            self.failures.append(
                f"{label}: status {response.status_code} != {status}: {response.text[:300]!r}"
            )
        if not response.headers.get("x-request-id"):
            self.failures.append(f"{label}: no X-Request-ID")

    def check(self, label: str, ok: bool, detail: object = "") -> None:
        if not ok:
            self.failures.append(f"{label}: {detail}")

    def done(self) -> None:
        if self.failures:
            lines = [f if len(f) < 400 else f[:400] + "…" for f in self.failures]
            pytest.fail(f"{len(lines)} failed checks:\n" + "\n".join(lines), pytrace=False)


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

MALFORMED_JSON = [
    b"{",
    b"}",
    b'{"id": "x",}',
    b"{'id': 'x'}",
    b'{"id" "x"}',
    b'{"id": "x"} trailing',
    b'{"id": "x"}{"id": "y"}',
    b'{"id": "x", "tasks": [}',
    b'{"id": undefined}',
    b'{"id": True}',
    b'{"a": 01}',
    b'{"a": .5}',
    b'{"a": "\\x41"}',
    b'{"a": "raw\tcontrol"}',
    b'{"a": "unterminated}',
    b"/* comment */ {}",
    b"\x00",
    b" ",
]

DUPLICATE_KEYS = [
    b'{"id": "victim", "id": "victim", "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "key": "b", "action": "mock"}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": {"x": 1, "x": 2}}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "input": {"deep": [{"y": {"z": 1, "z": 1}}]}}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "retry": {"max_attempts": 2, "max_attempts": 3}}]}',
]

NON_FINITE = [
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": {"x": NaN}}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "timeout_seconds": Infinity}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "retry": {"initial_backoff_seconds": -Infinity}}]}',
    b'{"id": "victim", "extra": NaN, "tasks": [{"key": "a", "action": "mock"}]}',
]

WRONG_TYPES: list[tuple[dict[str, Any], str]] = [
    (definition(retry={"max_attempts": "3"}), "/tasks/0/retry/max_attempts"),
    (definition(retry={"max_attempts": True}), "/tasks/0/retry/max_attempts"),
    (definition(retry={"initial_backoff_seconds": "1"}), "/tasks/0/retry/initial_backoff_seconds"),
    (definition(timeout_seconds="30"), "/tasks/0/timeout_seconds"),
    (definition(depends_on="b"), "/tasks/0/depends_on"),
    (definition(input=[]), "/tasks/0/input"),
    (definition(input="x"), "/tasks/0/input"),
    (definition(action=None), "/tasks/0/action"),
    (definition(retry="fast"), "/tasks/0/retry"),
    ({"id": "victim", "tasks": [{"key": 5, "action": "mock"}]}, "/tasks/0/key"),
    ({"id": 7, "tasks": [{"key": "a", "action": "mock"}]}, "/id"),
    ({"id": "victim", "tasks": {"key": "a", "action": "mock"}}, "/tasks"),
    ({"id": "victim", "tasks": ["a"]}, "/tasks/0"),
    ({**definition(), "description": ["text"]}, "/description"),
]

UNKNOWN_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({**definition(), "color": "red"}, "/color"),
    (definition(colour="blue"), "/tasks/0/colour"),
    (definition(retry={"max_attempts": 2, "jitter": True}), "/tasks/0/retry/jitter"),
]

NUL_STRINGS: list[tuple[bytes, str]] = [
    (encode({**definition(), "description": "a\u0000b"}), "/description"),
    (encode(definition(input={"x": "a\u0000b"})), "/tasks/0/input/x"),
    (encode(definition(input={"a\u0000b": 1})), "/tasks/0/input/a\u0000b"),
    (encode(definition(input={"list": ["ok", "\u0000"]})), "/tasks/0/input/list/1"),
    (encode(definition(action="mo\u0000ck")), "/tasks/0/action"),
    (encode({**definition(), "un\u0000known": 1}), "/un\u0000known"),
]

LONE_SURROGATES = [
    b'{"id": "victim", "description": "\\ud800", "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock",'
    b' "input": {"x": "\\udc00\\ud800"}}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": {"\\ud800": 1}}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "\\ud800"}]}',
    b'{"id": "victim\\ud800", "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "\\ud800": 1, "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "tasks": [{"key": "a", "action": "mock", "depends_on": ["\\ud800"]}]}',
]

NOT_UTF8 = [
    b'{"id": "caf\xe9", "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "description": "\xed\xa0\x80", "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "description": "\xc0\xaf", "tasks": [{"key": "a", "action": "mock"}]}',
    b'{"id": "victim", "description": "\xff\xfe", "tasks": [{"key": "a", "action": "mock"}]}',
    '{"id": "victim", "tasks": [{"key": "a", "action": "mock"}]}'.encode("utf-16"),
]


def nested_arrays(levels: int) -> str:
    return "[" * levels + "]" * levels


def nested_objects(levels: int) -> str:
    return '{"n": ' * levels + "1" + "}" * levels


def with_input(raw_input: str) -> bytes:
    return (
        '{"id": "victim", "tasks": [{"key": "a", "action": "mock", "input": ' + raw_input + "}]}"
    ).encode()


def test_definition_bodies_are_rejected_and_write_nothing(live_api: LiveApi) -> None:
    create(live_api, definition("seed"))
    before = snapshot(live_api)
    found = Findings()
    url = f"{V1}/workflows"

    def post(body: bytes, headers: Mapping[str, str] = JSON) -> httpx.Response:
        return live_api.operator.post(url, content=body, headers={**headers, **idem()})

    for body in MALFORMED_JSON:
        found.problem(f"malformed {body[:40]!r}", post(body), 400, "invalid_json")
    for body in DUPLICATE_KEYS:
        found.problem(f"duplicate keys {body[-70:]!r}", post(body), 400, "invalid_json")
    for body in NON_FINITE:
        found.problem(f"non-finite {body[-60:]!r}", post(body), 400, "invalid_json")
    for value, path in WRONG_TYPES:
        response = post(encode(value))
        found.problem(f"wrong type at {path}", response, 400, "invalid_definition", path)
    for value, path in UNKNOWN_FIELDS:
        response = post(encode(value))
        found.problem(f"unknown field {path}", response, 400, "invalid_definition", path)
    # Every problem is reported, not only the first.
    several = {
        "id": "victim",
        "color": 1,
        "tasks": [{"key": "a", "action": "mock", "timeout_seconds": "9"}],
    }
    response = post(encode(several))
    found.problem("two problems", response, 400, "invalid_definition", "/color")
    found.problem("two problems", response, 400, "invalid_definition", "/tasks/0/timeout_seconds")

    # Nesting: far too deep for any parser, and deeper than stored JSON may be.
    deep_bodies = {
        "10,000 arrays as the body": nested_arrays(10_000).encode(),
        "10,000 objects as the body": nested_objects(10_000).encode(),
        "10,000 arrays inside input": with_input('{"x": ' + nested_arrays(10_000) + "}"),
        "10,000 objects inside input": with_input(nested_objects(10_000)),
    }
    for label, body in deep_bodies.items():
        found.problem(label, post(body), 400, "invalid_json")
    for levels in (70, 200):
        response = post(with_input(nested_objects(levels)))
        found.problem(
            f"{levels} objects inside input", response, 400, {"invalid_json", "invalid_definition"}
        )

    for body in NOT_UTF8:
        found.problem(f"not UTF-8 {body[:40]!r}", post(body), 400, "invalid_json")
    for body, path in NUL_STRINGS:
        found.problem(f"NUL at {path!r}", post(body), 400, "invalid_definition", path)
    for body in LONE_SURROGATES:
        found.problem(
            f"lone surrogate {body[:90]!r}", post(body), 400, {"invalid_json", "invalid_definition"}
        )

    for body in (b"[]", b'[{"id": "victim"}]', b'"victim"', b"42", b"null", b"true"):
        found.problem(f"not an object {body!r}", post(body), 400, "invalid_json")
    found.problem("empty body", post(b""), 400, "invalid_json")
    found.problem("whitespace body", post(b" \r\n\t "), 400, "invalid_json")

    valid = encode(definition())
    for content_type in (
        None,
        "text/plain",
        "application/json; charset=latin-1",
        "application/json; charset=utf-16",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "text/json",
    ):
        headers = {} if content_type is None else {"Content-Type": content_type}
        response = post(valid, headers)
        found.problem(f"content type {content_type!r}", response, 415, "unsupported_media_type")

    # Over 1 MiB: declared, streamed without a length, and a length that lies.
    big = encode({**definition(), "description": "x" * (2 * MIB)})
    found.problem("2 MiB body", post(big), 413, "payload_too_large")
    just_over = valid + b" " * (MIB + 1 - len(valid))
    found.problem("1 MiB + 1 byte", post(just_over), 413, "payload_too_large")

    def chunks() -> Iterator[bytes]:
        yield b'{"id": "victim", "description": "'
        for _ in range(32):
            yield b"y" * 65536
        yield b'", "tasks": [{"key": "a", "action": "mock"}]}'

    response = live_api.operator.post(url, content=chunks(), headers={**JSON, **idem()})
    found.problem("2 MiB chunked body", response, 413, "payload_too_large")
    lying = raw_post(
        url,
        {
            "Authorization": f"Bearer {OPERATOR_TOKEN}".encode(),
            "Content-Type": b"application/json",
            "Idempotency-Key": b"hostile-lying-length",
            "Content-Length": b"5000000",
        },
        valid,
    )
    found.problem(
        "Content-Length lies big",
        raw_exchange(live_api.base_url, lying),
        413,
        "payload_too_large",
    )

    found.check("nothing written", snapshot(live_api) == before, "the listings changed")
    found.done()


def test_allowed_bodies_at_the_limits_are_accepted(live_api: LiveApi) -> None:
    """Controls: what the rejections above must not catch."""
    found = Findings()
    url = f"{V1}/workflows"
    exact = encode(definition("exactly-one-mib"))
    exact += b" " * (MIB - len(exact))
    assert len(exact) == MIB
    response = live_api.operator.post(url, content=exact, headers={**JSON, **idem()})
    found.status("a body of exactly 1 MiB", response, 201)
    for workflow_id, content_type in (
        ("charset-utf8", "application/json; charset=UTF-8"),
        ("upper-case-type", "Application/JSON"),
    ):
        response = live_api.operator.post(
            url,
            content=encode(definition(workflow_id)),
            headers={"Content-Type": content_type, **idem()},
        )
        found.status(f"content type {content_type!r}", response, 201)
    response = live_api.operator.post(
        url,
        content=with_input(nested_objects(30)).replace(b"victim", b"nested-30"),
        headers={**JSON, **idem()},
    )
    found.status("30 levels of objects in input", response, 201)
    unicode_input = definition("unicode-input", input={"名前": "ü🙂\u202e", "emoji🙂": ["ok"]})
    response = live_api.operator.post(url, json=unicode_input, headers=idem())
    found.status("non-ASCII input", response, 201)
    if response.status_code == 201:
        stored = response.json()["definition"]["tasks"][0]["input"]
        found.check("non-ASCII input stored as sent", stored == unicode_input["tasks"][0]["input"])
    found.done()


# -- other bodies ------------------------------------------------------------------------------


def test_version_run_and_cancel_bodies(live_api: LiveApi) -> None:
    create(live_api, definition("seed"))
    create(live_api, definition("slow", input={"sleep_ms": 60_000}))
    slow_run = start(live_api, "slow")
    before = snapshot(live_api)
    found = Findings()

    versions = f"{V1}/workflows/seed/versions"
    for other_id in ("other", "Seed", "seed-2", "seed "):
        response = live_api.operator.post(versions, json=definition(other_id), headers=idem())
        found.problem(f"version id {other_id!r}", response, 400, "workflow_id_mismatch")
    for raw in MALFORMED_JSON[:6] + DUPLICATE_KEYS[1:3] + NON_FINITE[:2]:
        response = live_api.operator.post(versions, content=raw, headers={**JSON, **idem()})
        found.problem(f"version body {raw[:50]!r}", response, 400, "invalid_json")
    for value, path in WRONG_TYPES[:4] + UNKNOWN_FIELDS:
        body_without_id = {k: v for k, v in value.items() if k != "id"}
        response = live_api.operator.post(versions, json=body_without_id, headers=idem())
        found.problem(f"version field {path}", response, 400, "invalid_definition", path)
    response = live_api.operator.post(
        versions,
        content=encode(definition("seed")),
        headers={"Content-Type": "text/plain", **idem()},
    )
    found.problem("version as text/plain", response, 415, "unsupported_media_type")
    response = live_api.operator.post(
        versions,
        content=encode({"tasks": [{"key": "a", "action": "mock"}], "description": "z" * 2 * MIB}),
        headers={**JSON, **idem()},
    )
    found.problem("2 MiB version", response, 413, "payload_too_large")

    runs = f"{V1}/workflows/seed/versions/1/runs"
    run_bodies: list[tuple[str, bytes, str, str | set[str]]] = [
        (
            "unknown field",
            encode({"input": {}, "priority": 1}),
            "application/json",
            "invalid_argument",
        ),
        ("unknown field only", encode({"inputs": {}}), "application/json", "invalid_argument"),
        ("input is a list", encode({"input": []}), "application/json", "invalid_argument"),
        ("input is a string", encode({"input": "x"}), "application/json", "invalid_argument"),
        ("input is a number", encode({"input": 3}), "application/json", "invalid_argument"),
        ("input is null", encode({"input": None}), "application/json", "invalid_argument"),
        (
            "NUL in input value",
            encode({"input": {"x": "\u0000"}}),
            "application/json",
            "invalid_argument",
        ),
        (
            "NUL in input key",
            encode({"input": {"\u0000": 1}}),
            "application/json",
            "invalid_argument",
        ),
        (
            "NUL nested",
            encode({"input": {"a": [{"b": "c\u0000"}]}}),
            "application/json",
            "invalid_argument",
        ),
        (
            "surrogate value",
            b'{"input": {"x": "\\ud800"}}',
            "application/json",
            {"invalid_argument", "invalid_json"},
        ),
        (
            "surrogate key",
            b'{"input": {"\\udfff": 1}}',
            "application/json",
            {"invalid_argument", "invalid_json"},
        ),
        (
            "too deep",
            ('{"input": ' + nested_objects(80) + "}").encode(),
            "application/json",
            {"invalid_argument", "invalid_json"},
        ),
        ("malformed", b'{"input": {', "application/json", "invalid_json"),
        ("duplicate keys", b'{"input": {}, "input": {}}', "application/json", "invalid_json"),
        (
            "duplicate nested keys",
            b'{"input": {"a": 1, "a": 1}}',
            "application/json",
            "invalid_json",
        ),
        ("NaN", b'{"input": {"a": NaN}}', "application/json", "invalid_json"),
        ("an array", b"[]", "application/json", "invalid_json"),
        ("null", b"null", "application/json", "invalid_json"),
        ("not UTF-8", b'{"input": {"a": "\xff"}}', "application/json", "invalid_json"),
    ]
    for label, raw, content_type, code in run_bodies:
        response = live_api.operator.post(
            runs, content=raw, headers={"Content-Type": content_type, **idem()}
        )
        found.problem(f"run start: {label}", response, 400, code)
    for content_type in ("text/plain", "application/json; charset=latin-1"):
        response = live_api.operator.post(
            runs, content=b'{"input": {}}', headers={"Content-Type": content_type, **idem()}
        )
        found.problem(f"run start as {content_type}", response, 415, "unsupported_media_type")
    response = live_api.operator.post(runs, content=b'{"input": {}}', headers=idem())
    found.problem("run start body without a content type", response, 415, "unsupported_media_type")
    response = live_api.operator.post(
        runs,
        content=encode({"input": {"pad": "p" * 2 * MIB}}),
        headers={**JSON, **idem()},
    )
    found.problem("2 MiB run input", response, 413, "payload_too_large")

    cancel = f"{V1}/runs/{slow_run['run_id']}/cancel"
    for label, raw, code in (
        ("a field", encode({"reason": "x"}), "invalid_argument"),
        ("malformed", b"{", "invalid_json"),
        ("an array", b"[]", "invalid_json"),
    ):
        response = live_api.operator.post(cancel, content=raw, headers={**JSON, **idem()})
        found.problem(f"cancel body {label}", response, 400, code)
    response = live_api.operator.post(
        cancel, content=b"{}", headers={"Content-Type": "text/plain", **idem()}
    )
    found.problem("cancel body as text/plain", response, 415, "unsupported_media_type")
    for if_match in ("garbage", '"abc"', '"-1"', '"99999999999999999999"', 'W/"0"', '"0", "x"'):
        response = live_api.operator.post(cancel, headers={"If-Match": if_match, **idem()})
        found.problem(f"cancel If-Match {if_match}", response, 412, "precondition_failed")

    after = snapshot(live_api)
    found.check("nothing written", after == before, f"{before} -> {after}")
    run = live_api.viewer.get(f"{V1}/runs/{slow_run['run_id']}").json()
    found.check("no cancel recorded", run["cancel_requested"] is False, run)
    found.check("not canceled", run["status"] != "canceled", run)

    # Controls: the bodies that are allowed.
    response = live_api.operator.post(
        versions, json={"tasks": [{"key": "b", "action": "mock"}]}, headers=idem()
    )
    found.status("version body without an id", response, 201)
    if response.status_code == 201:
        found.check("version 2", response.json()["version"] == 2, response.json())
    response = live_api.operator.post(versions, json=definition("seed"), headers=idem())
    found.status("version body with the path's id", response, 201)
    response = live_api.operator.post(runs, headers=idem())
    found.status("run start with an empty body and no content type", response, 202)
    response = live_api.operator.post(runs, json={}, headers=idem())
    found.status("run start with {}", response, 202)
    response = live_api.operator.post(runs, json={"input": {"k": [1, {"x": None}]}}, headers=idem())
    found.status("run start with an input", response, 202)
    response = live_api.operator.post(cancel, headers=idem())
    found.status("cancel with an empty body and no content type", response, 202)
    found.done()


# -- Idempotency-Key ---------------------------------------------------------------------------


def test_idempotency_key_is_required_and_validated(live_api: LiveApi) -> None:
    create(live_api, definition("seed"))
    run = start(live_api, "seed")
    before = snapshot(live_api)
    found = Findings()
    url = f"{V1}/workflows"
    body = definition()

    writes = [
        (url, body),
        (f"{V1}/workflows/seed/versions", definition("seed")),
        (f"{V1}/workflows/seed/versions/1/runs", {}),
        (f"{V1}/runs/{run['run_id']}/cancel", None),
    ]
    for path, write_body in writes:
        response = live_api.operator.post(path, json=write_body)
        found.problem(f"no key on {path}", response, 400, "idempotency_key_required")
        bad_key = {"Idempotency-Key": "has space"}
        response = live_api.operator.post(path, json=write_body, headers=bad_key)
        found.problem(f"bad key on {path}", response, 400, "invalid_argument")

    bad_keys: dict[str, str | bytes] = {
        "empty": "",
        "256 characters": "k" * 256,
        "1,000 characters": "k" * 1000,
        "inner space": "a b",
        "inner tab": "a\tb",
        "non-ASCII": "clé-🙂".encode(),
        "latin-1 byte": b"key\xe9",
        "SQL": "' OR 1=1 --",
    }
    for label, key in bad_keys.items():
        key_bytes = key if isinstance(key, bytes) else key.encode()
        response = live_api.operator.post(url, json=body, headers={b"Idempotency-Key": key_bytes})
        found.problem(f"key {label}", response, 400, "invalid_argument")
    # Control characters: httpx will not send them, so they go raw.
    for label, control in (("DEL", b"key\x7f"), ("\\x01", b"key\x01x"), ("\\x1f", b"\x1fkey")):
        request = raw_post(
            url,
            {
                "Authorization": f"Bearer {OPERATOR_TOKEN}".encode(),
                "Content-Type": b"application/json",
                "Idempotency-Key": control,
                "Content-Length": str(len(encode(body))).encode(),
            },
            encode(body),
        )
        response = raw_exchange(live_api.base_url, request)
        # The HTTP server may refuse a control character before the app sees it (a plain 400);
        # if the app sees it, it is an invalid_argument problem. Either way: 400, nothing written.
        if response.headers.get("content-type", "").startswith("application/problem+json"):
            found.problem(f"key with {label}", response, 400, "invalid_argument")
        else:
            found.check(f"key with {label}", response.status_code == 400, response.status_code)

    found.check("nothing written", snapshot(live_api) == before, "the listings changed")

    visible = "".join(chr(c) for c in range(0x21, 0x7F))
    key = (visible * 3)[:255]
    response = live_api.operator.post(
        url, json=definition("max-key"), headers={"Idempotency-Key": key}
    )
    found.status("255 visible characters", response, 201)
    replay = live_api.operator.post(
        url, json=definition("max-key"), headers={"Idempotency-Key": key}
    )
    found.status("255 visible characters, replayed", replay, 201)
    found.check(
        "the replay is marked", replay.headers.get("idempotent-replayed") == "true", replay.headers
    )
    found.check("the replay is the original", replay.json() == response.json())
    found.done()


# -- query parameters --------------------------------------------------------------------------

BAD_LIMITS = ["0", "-1", "201", "999999999999", "1.5", "1e2", "abc", "", " 5", "+5", "0x10", "٣"]


def test_query_parameters_on_every_listing(live_api: LiveApi) -> None:
    create(
        live_api,
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
    live_api.operator.post(f"{V1}/workflows/seed/versions", json=definition("seed"), headers=idem())
    create(live_api, definition("other"))
    run_a = live_api.wait_for_run(start(live_api, "seed")["run_id"])["run_id"]
    run_b = live_api.wait_for_run(start(live_api, "seed")["run_id"])["run_id"]
    before = snapshot(live_api)
    found = Findings()

    listings = {
        "workflows": f"{V1}/workflows",
        "versions": f"{V1}/workflows/seed/versions",
        "runs": f"{V1}/runs",
        "tasks": f"{V1}/runs/{run_a}/tasks",
        "attempts": f"{V1}/runs/{run_a}/tasks/a/attempts",
        "events": f"{V1}/runs/{run_a}/events",
    }

    def get(path: str, params: Any) -> httpx.Response:
        return live_api.viewer.get(path, params=params)

    cursors: dict[str, str] = {}
    for name, path in listings.items():
        first = get(path, {"limit": "1"})
        found.status(f"{name} limit=1", first, 200)
        cursor = first.json().get("next_cursor") if first.status_code == 200 else None
        found.check(f"{name} has a second page", isinstance(cursor, str), first.text[:200])
        if isinstance(cursor, str):
            cursors[name] = cursor
            found.status(f"{name} next page", get(path, {"limit": "1", "cursor": cursor}), 200)
            found.status(f"{name} next page, other limit", get(path, {"cursor": cursor}), 200)
        found.status(f"{name} limit=200", get(path, {"limit": "200"}), 200)
        for limit in BAD_LIMITS:
            found.problem(
                f"{name} limit={limit!r}", get(path, {"limit": limit}), 400, "invalid_argument"
            )
        found.problem(
            f"{name} repeated limit",
            get(path, [("limit", "1"), ("limit", "2")]),
            400,
            "invalid_argument",
        )
        found.problem(
            f"{name} repeated equal limit",
            get(path, [("limit", "5"), ("limit", "5")]),
            400,
            "invalid_argument",
        )
        found.problem(
            f"{name} unknown parameter", get(path, {"sort": "desc"}), 400, "invalid_argument"
        )
        found.problem(
            f"{name} unknown parameter, empty", get(path, {"offset": ""}), 400, "invalid_argument"
        )
        for garbage in (
            "",
            "abc",
            "!!!",
            "%00",
            "\u0000",
            "AAAA",
            "é",
            "x" * 2000,
            "=" * 40,
            "null",
        ):
            found.problem(
                f"{name} cursor {garbage[:20]!r}",
                get(path, {"cursor": garbage}),
                400,
                "invalid_cursor",
            )
        if isinstance(cursor, str):
            found.problem(
                f"{name} repeated cursor",
                get(path, [("cursor", cursor), ("cursor", cursor)]),
                400,
                "invalid_argument",
            )
            for label, broken in (
                ("truncated", cursor[:-4]),
                ("truncated to half", cursor[: len(cursor) // 2]),
                ("tampered", cursor[:10] + ("A" if cursor[10] != "A" else "B") + cursor[11:]),
                ("tampered at the end", cursor[:-1] + ("A" if cursor[-1] != "A" else "B")),
                ("doubled", cursor + cursor),
                ("standard base64", cursor.replace("-", "+").replace("_", "/") + "+/"),
            ):
                found.problem(
                    f"{name} cursor {label}", get(path, {"cursor": broken}), 400, "invalid_cursor"
                )

    runs = listings["runs"]
    for status in ("done", "SUCCEEDED", "succeeded ", "", "running,failed", "0"):
        found.problem(
            f"runs status={status!r}", get(runs, {"status": status}), 400, "invalid_argument"
        )
    found.problem(
        "runs repeated status",
        get(runs, [("status", "running"), ("status", "failed")]),
        400,
        "invalid_argument",
    )
    for workflow_id in ("", "UPPER", "-x", "a" * 64, "a/b"):
        found.problem(
            f"runs workflow_id={workflow_id!r}",
            get(runs, {"workflow_id": workflow_id}),
            400,
            "invalid_argument",
        )
    found.status("runs status filter", get(runs, {"status": "succeeded"}), 200)
    found.status("runs workflow filter, unknown workflow", get(runs, {"workflow_id": "nope"}), 200)

    # A real cursor replayed on another listing, or with other filters.
    replays: list[tuple[str, str, Any]] = []
    if "runs" in cursors:
        runs_cursor = cursors["runs"]
        replays += [
            ("runs cursor on events", listings["events"], {"cursor": runs_cursor}),
            ("runs cursor on tasks", listings["tasks"], {"cursor": runs_cursor}),
            ("runs cursor on attempts", listings["attempts"], {"cursor": runs_cursor}),
            ("runs cursor on workflows", listings["workflows"], {"cursor": runs_cursor}),
            ("runs cursor on versions", listings["versions"], {"cursor": runs_cursor}),
            ("runs cursor + status", runs, {"cursor": runs_cursor, "status": "succeeded"}),
            ("runs cursor + workflow_id", runs, {"cursor": runs_cursor, "workflow_id": "seed"}),
        ]
        filtered = get(runs, {"limit": "1", "workflow_id": "seed"}).json()["next_cursor"]
        found.check("filtered runs have a second page", isinstance(filtered, str))
        if isinstance(filtered, str):
            replays += [
                ("filtered runs cursor without the filter", runs, {"cursor": filtered}),
                (
                    "filtered runs cursor, other workflow",
                    runs,
                    {"cursor": filtered, "workflow_id": "other"},
                ),
                (
                    "filtered runs cursor + status",
                    runs,
                    {"cursor": filtered, "workflow_id": "seed", "status": "failed"},
                ),
            ]
    if "events" in cursors:
        replays += [
            (
                "run A's events cursor on run B",
                f"{V1}/runs/{run_b}/events",
                {"cursor": cursors["events"]},
            ),
            ("events cursor on tasks", listings["tasks"], {"cursor": cursors["events"]}),
            ("events cursor on runs", runs, {"cursor": cursors["events"]}),
        ]
    if "tasks" in cursors:
        replays += [
            ("tasks cursor on events", listings["events"], {"cursor": cursors["tasks"]}),
            (
                "run A's tasks cursor on run B",
                f"{V1}/runs/{run_b}/tasks",
                {"cursor": cursors["tasks"]},
            ),
        ]
    if "attempts" in cursors:
        replays += [
            (
                "attempts cursor on run B",
                f"{V1}/runs/{run_b}/tasks/a/attempts",
                {"cursor": cursors["attempts"]},
            ),
            (
                "attempts cursor on task b",
                f"{V1}/runs/{run_a}/tasks/b/attempts",
                {"cursor": cursors["attempts"]},
            ),
        ]
    if "versions" in cursors:
        replays.append(
            (
                "versions cursor on another workflow",
                f"{V1}/workflows/other/versions",
                {"cursor": cursors["versions"]},
            )
        )
    if "workflows" in cursors:
        replays.append(
            ("workflows cursor on versions", listings["versions"], {"cursor": cursors["workflows"]})
        )
    for label, path, params in replays:
        found.problem(label, get(path, params), 400, "invalid_cursor")

    found.check("nothing written", snapshot(live_api) == before, "the listings changed")
    found.done()


# -- hostile strings in paths and queries ------------------------------------------------------

HOSTILE = [
    "' OR 1=1 --",
    "1; DROP TABLE workflows; --",
    '" OR ""="',
    "') UNION SELECT * FROM workflow_runs --",
    "$1",
    "%s",
    "{}",
    "*",
    "null",
    "-1",
    "0",
    "99999999999999999999",
    "00000000-0000-0000-0000-000000000000'",
    "ü名前🙂\u202e",
    "a" * 5000,
    "é" * 1000,
    "\u0000",
    "\ufffd",
    "\t",
]
# Already percent-encoded: sent as they are.
HOSTILE_RAW = ["%00", "%2500", "..%2F..%2Fetc%2Fpasswd", "%ED%A0%80", "%FF%FE", "%C0%AF", "%2E%2E"]


def segments() -> Iterator[tuple[str, str]]:
    """(label, path segment) pairs, percent-encoded for the URL."""
    for value in HOSTILE:
        yield ascii(value[:30]), quote(value, safe="")
    for raw in HOSTILE_RAW:
        yield raw, raw


def test_hostile_path_and_query_strings(live_api: LiveApi) -> None:
    create(live_api, definition("seed"))
    run = live_api.wait_for_run(start(live_api, "seed")["run_id"])
    run_id = run["run_id"]
    missing_run = "018f0000-0000-7000-8000-000000000000"
    before = snapshot(live_api)
    detail_before = {
        path: live_api.viewer.get(path).json()
        for path in (
            f"{V1}/workflows/seed",
            f"{V1}/workflows/seed/versions/1",
            f"{V1}/runs/{run_id}",
            f"{V1}/runs/{run_id}/tasks",
            f"{V1}/runs/{run_id}/events",
        )
    }
    found = Findings()
    viewer, operator = live_api.viewer, live_api.operator

    def expect(what: str, response: httpx.Response, code: str, label: str, seg: str) -> None:
        # A segment that decodes to a slash or a dot segment may match no route at all.
        codes = {code, "not_found"} if seg == "%2E%2E" or "%2F" in seg else {code}
        found.problem(f"{what} [{label}]", response, 404, codes)

    for label, seg in segments():
        for what, response, code in (
            ("GET workflow", viewer.get(f"{V1}/workflows/{seg}"), "workflow_not_found"),
            ("GET versions", viewer.get(f"{V1}/workflows/{seg}/versions"), "workflow_not_found"),
            ("GET version", viewer.get(f"{V1}/workflows/{seg}/versions/1"), "workflow_not_found"),
            (
                "GET version of it",
                viewer.get(f"{V1}/workflows/seed/versions/{seg}"),
                "version_not_found",
            ),
            (
                "POST version",
                operator.post(
                    f"{V1}/workflows/{seg}/versions",
                    json={"tasks": [{"key": "a", "action": "mock"}]},
                    headers=idem(),
                ),
                "workflow_not_found",
            ),
            (
                "POST run",
                operator.post(f"{V1}/workflows/{seg}/versions/1/runs", headers=idem()),
                "workflow_not_found",
            ),
            (
                "POST run of it",
                operator.post(f"{V1}/workflows/seed/versions/{seg}/runs", headers=idem()),
                "version_not_found",
            ),
            ("GET run", viewer.get(f"{V1}/runs/{seg}"), "run_not_found"),
            (
                "POST cancel",
                operator.post(f"{V1}/runs/{seg}/cancel", headers=idem()),
                "run_not_found",
            ),
            ("GET tasks", viewer.get(f"{V1}/runs/{seg}/tasks"), "run_not_found"),
            ("GET events", viewer.get(f"{V1}/runs/{seg}/events"), "run_not_found"),
            ("GET task of a run", viewer.get(f"{V1}/runs/{run_id}/tasks/{seg}"), "task_not_found"),
            (
                "GET attempts of a run",
                viewer.get(f"{V1}/runs/{run_id}/tasks/{seg}/attempts"),
                "task_not_found",
            ),
            ("GET task, hostile run", viewer.get(f"{V1}/runs/{seg}/tasks/a"), "run_not_found"),
            (
                "GET attempts, hostile run",
                viewer.get(f"{V1}/runs/{seg}/tasks/a/attempts"),
                "run_not_found",
            ),
        ):
            expect(what, response, code, label, seg)
    # Under a run that does not exist, any task key is the run's 404 (as a version path under a
    # missing workflow is workflow_not_found, SPEC §6), whatever the key looks like.
    for key in ("a", "zz-missing", quote("' OR 1=1 --", safe=""), "%00", "b" * 5000):
        for suffix in ("", "/attempts"):
            response = viewer.get(f"{V1}/runs/{missing_run}/tasks/{key}{suffix}")
            found.problem(
                f"GET task{suffix}, missing run [{key[:20]}]", response, 404, "run_not_found"
            )

    for value in HOSTILE:
        label = ascii(value[:30])
        for name, path in (
            ("workflows", f"{V1}/workflows"),
            ("runs", f"{V1}/runs"),
            ("events", f"{V1}/runs/{run_id}/events"),
        ):
            found.problem(
                f"{name} limit [{label}]",
                viewer.get(path, params={"limit": value}),
                400,
                "invalid_argument",
            )
            found.problem(
                f"{name} cursor [{label}]",
                viewer.get(path, params={"cursor": value}),
                400,
                "invalid_cursor",
            )
            found.problem(
                f"{name} parameter named [{label}]",
                viewer.get(path, params={value: "1"}),
                400,
                "invalid_argument",
            )
        found.problem(
            f"runs status [{label}]",
            viewer.get(f"{V1}/runs", params={"status": value}),
            400,
            "invalid_argument",
        )
        if not WORKFLOW_ID.match(value):
            found.problem(
                f"runs workflow_id [{label}]",
                viewer.get(f"{V1}/runs", params={"workflow_id": value}),
                400,
                "invalid_argument",
            )
    for raw in HOSTILE_RAW:
        for query in (
            f"limit={raw}",
            f"cursor={raw}",
            f"status={raw}",
            f"workflow_id={raw}",
            f"{raw}=1",
        ):
            response = viewer.get(f"{V1}/runs?{query}")
            code = "invalid_cursor" if query.startswith("cursor") else "invalid_argument"
            found.problem(f"runs ?{query}", response, 400, code)

    many = "&".join(f"p{i}=1" for i in range(500))
    found.problem(
        "500 unknown parameters", viewer.get(f"{V1}/runs?{many}"), 400, "invalid_argument"
    )
    many_limits = "&".join("limit=1" for _ in range(500))
    response = viewer.get(f"{V1}/runs?{many_limits}")
    found.problem("500 repeated limits", response, 400, "invalid_argument")

    # The database is intact: the same listings and the same resources.
    found.check("listings intact", snapshot(live_api) == before, "the listings changed")
    for path, body in detail_before.items():
        found.check(f"{path} intact", viewer.get(path).json() == body)
    response = operator.post(f"{V1}/workflows", json=definition("after-the-storm"), headers=idem())
    found.status("writes still work", response, 201)
    found.done()

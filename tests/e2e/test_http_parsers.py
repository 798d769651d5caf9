"""Both HTTP/1.1 parsers (h11 and httptools, ADR 0036) against hostile request heads and bodies.

Raw bytes on a socket to the real service (uvicorn, the PostgreSQL store) with each parser in
turn. The parsers differ on some inputs: where h11 is lenient (a folded header, a bare LF, two
equal ``Content-Length`` headers, ``Content-Length`` beside ``Transfer-Encoding``, an unknown
method) llhttp refuses, and the guard of ``guarded_httptools`` adds bounds llhttp lacks (a
head's size and its header count). Every answer is either the app's own or a 400 problem with
a request id and ``Connection: close``; never a 5xx, never a hang.
"""

from __future__ import annotations

import json
import select
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from _pytest.mark import ParameterSet

from tests.cli.test_serve_errors import _serve
from tests.e2e.test_event_stream import remote_run
from tests.e2e.test_hostile_input import BOTH_PARSERS, table
from tests.plugins.live_api import OPERATOR_TOKEN, VIEWER_TOKEN, LiveApi, settings
from tests.waiting import wait_until
from workload_api._http_server import MAX_HEAD_BYTES, MAX_HEADERS
from workload_api.settings import Settings

HOST = b"Host: 127.0.0.1\r\n"
VIEWER = f"Authorization: Bearer {VIEWER_TOKEN}\r\n".encode()
OPERATOR = f"Authorization: Bearer {OPERATOR_TOKEN}\r\n".encode()
RUNS = b"/api/v1/runs"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def problem(self) -> dict[str, object]:
        assert self.headers.get("content-type") == "application/problem+json", self
        problem: dict[str, object] = json.loads(self.body)
        return problem


def parse_answers(received: bytes) -> list[Answer]:
    """The responses in ``received``, in order (each with a ``Content-Length`` or chunked)."""
    answers = []
    rest = received
    while rest:
        head, separator, rest = rest.partition(b"\r\n\r\n")
        assert separator, f"a cut response head: {head[:200]!r}"
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0].startswith("HTTP/1.1 "), lines[0]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        status = int(lines[0].split()[1])
        if status == 100:
            continue
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line, 16)
                body, rest = body + rest[:size], rest[size + 2 :]
                if size == 0:
                    break
        else:
            length = int(headers.get("content-length", "0"))
            body, rest = rest[:length], rest[length:]
        answers.append(Answer(status, headers, body))
    return answers


def exchange(api: LiveApi, data: bytes, *, timeout: float = 10) -> tuple[list[Answer], bool]:
    """Send ``data`` on a fresh connection; the answers, and whether the server closed it."""
    url = httpx.URL(api.base_url)
    assert url.port is not None
    received = b""
    with socket.create_connection((url.host, url.port), timeout=timeout) as sock:
        sock.sendall(data)
        try:
            while chunk := sock.recv(65536):
                received += chunk
            closed = True
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            closed = False
    return parse_answers(received), closed


def assert_refused(answers: list[Answer], closed: bool) -> None:
    """One 400 ``invalid_argument`` problem with a request id, and the connection closed."""
    assert [a.status for a in answers] == [400], answers
    (answer,) = answers
    problem = answer.problem()
    assert problem["code"] == "invalid_argument", problem
    assert answer.headers.get("x-request-id") == problem["request_id"], answer
    assert answer.headers.get("connection") == "close", answer
    assert closed, "the connection was left open"


def assert_served(api: LiveApi) -> None:
    assert api.viewer.get("/api/v1/runs").status_code == 200


def get(target: bytes = RUNS, *headers: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    return b"GET " + target + b" " + version + b"\r\n" + b"".join(headers)


CLOSE = b"Connection: close\r\n"
REFUSED = "400"
ACCEPTED = "200"


def case(case_id: str, request: bytes, h11: str, httptools: str) -> ParameterSet:
    """A request head (and body) and what each parser makes of it: refused 400 or served."""
    return pytest.param(request, {"h11": h11, "httptools": httptools}, id=case_id)


HEADS = table(
    # Request smuggling: two framings, or two lengths, of one body.
    case(
        "content-length-and-chunked",
        get(RUNS, HOST, VIEWER, CLOSE, b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
        + b"0\r\n\r\n",
        ACCEPTED,  # h11 frames by Transfer-Encoding (RFC 9112 §6.3) and ignores the length
        REFUSED,
    ),
    case(
        "two-content-lengths",
        get(RUNS, HOST, VIEWER, CLOSE, b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n") + b"abcd",
        REFUSED,
        REFUSED,
    ),
    case(
        "two-equal-content-lengths",
        get(RUNS, HOST, VIEWER, CLOSE, b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n"),
        ACCEPTED,
        REFUSED,
    ),
    case(
        "transfer-encoding-not-chunked",
        get(RUNS, HOST, VIEWER, CLOSE, b"Transfer-Encoding: gzip\r\n\r\n"),
        REFUSED,
        REFUSED,
    ),
    case(
        "transfer-encoding-chunked-then-identity",
        get(RUNS, HOST, VIEWER, CLOSE, b"Transfer-Encoding: chunked, identity\r\n\r\n"),
        REFUSED,
        REFUSED,
    ),
    # Malformed header lines.
    case(
        "obs-fold",
        get(RUNS, HOST, VIEWER, b"X-Note: one\r\n  two\r\n", CLOSE, b"\r\n"),
        ACCEPTED,
        REFUSED,
    ),
    case("nul-in-header", get(RUNS, HOST, VIEWER, b"X-Note: a\x00b\r\n\r\n"), REFUSED, REFUSED),
    case(
        "control-in-header",
        get(RUNS, HOST, VIEWER, b"X-Note: a\x01b\r\n", CLOSE, b"\r\n"),
        ACCEPTED,
        REFUSED,
    ),
    case("space-before-colon", get(RUNS, HOST, VIEWER, b"X-Note : a\r\n\r\n"), REFUSED, REFUSED),
    case("empty-header-name", get(RUNS, HOST, VIEWER, b": a\r\n\r\n"), REFUSED, REFUSED),
    case(
        "bare-lf-line-ends",
        get(RUNS, HOST, VIEWER, CLOSE, b"\r\n").replace(b"\r\n", b"\n"),
        ACCEPTED,
        REFUSED,
    ),
    case("no-host", get(RUNS, VIEWER, b"\r\n"), REFUSED, REFUSED),
    case("two-hosts", get(RUNS, HOST, HOST, VIEWER, b"\r\n"), REFUSED, REFUSED),
    # Request lines.
    case("invalid-method", b"G(T /api/v1/runs HTTP/1.1\r\n" + HOST + b"\r\n", REFUSED, REFUSED),
    case("http-0.9", b"GET /api/v1/runs\r\n\r\n", REFUSED, REFUSED),
    case("version-garbage", get(RUNS, HOST, b"\r\n", version=b"HTTP/x.y"), REFUSED, REFUSED),
    case(
        "http-1.0",
        get(RUNS, VIEWER, b"\r\n", version=b"HTTP/1.0"),  # no Host needed, closed after
        ACCEPTED,
        ACCEPTED,
    ),
    # Bounds (httptools; h11 reads a head that arrives whole in one read at any size).
    case(
        "max-header-lines",
        get(RUNS, HOST, VIEWER, CLOSE, *(b"X-%d: v\r\n" % n for n in range(MAX_HEADERS - 3)))
        + b"\r\n",
        ACCEPTED,
        ACCEPTED,
    ),
    case(
        "one-header-line-too-many",
        get(RUNS, HOST, VIEWER, CLOSE, *(b"X-%d: v\r\n" % n for n in range(MAX_HEADERS - 2)))
        + b"\r\n",
        ACCEPTED,
        REFUSED,
    ),
)


@pytest.mark.real_http_only  # raw bytes on a socket
@BOTH_PARSERS
@pytest.mark.parametrize(("request_bytes", "expected"), HEADS)
def test_a_hostile_head_is_served_or_refused_400(
    live_api: LiveApi, api_settings: Settings, request_bytes: bytes, expected: dict[str, str]
) -> None:
    answers, closed = exchange(live_api, request_bytes)
    if expected[api_settings.http_parser] == REFUSED:
        assert_refused(answers, closed)
    else:
        assert [a.status for a in answers] == [200], answers
        assert "items" in json.loads(answers[0].body)
    assert_served(live_api)


def head_of_size(content: int) -> bytes:
    """A GET whose target and header names and values hold ``content`` bytes together."""
    fixed = [b"host", b"127.0.0.1", b"authorization", f"Bearer {VIEWER_TOKEN}".encode()]
    fixed += [b"connection", b"close", b"x-pad"]
    pad = content - len(RUNS) - sum(map(len, fixed))
    return get(RUNS, HOST, VIEWER, CLOSE, b"X-Pad: " + b"p" * pad + b"\r\n\r\n")


@pytest.mark.real_http_only
@BOTH_PARSERS
@pytest.mark.parametrize("size", [MAX_HEAD_BYTES, MAX_HEAD_BYTES + 1], ids=["at", "over"])
def test_a_head_at_and_over_the_size_bound(
    live_api: LiveApi, api_settings: Settings, size: int
) -> None:
    answers, closed = exchange(live_api, head_of_size(size))
    if api_settings.http_parser == "httptools":
        if size > MAX_HEAD_BYTES:
            assert_refused(answers, closed)
            assert f"over {MAX_HEAD_BYTES} bytes" in str(answers[0].problem()["detail"])
        else:
            assert [a.status for a in answers] == [200], answers
    else:
        # h11 refuses a head over 16 KiB still incomplete after a read; one that arrives whole
        # is read at any size. Which happens depends on how loopback splits the write.
        assert [a.status for a in answers] in ([200], [400]), answers
        if answers[0].status == 400:
            assert_refused(answers, closed)
    assert_served(live_api)


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_a_header_sent_without_end_is_cut(live_api: LiveApi) -> None:
    """One header value, 16 KiB at a time, never ending: refused long before 1 MiB."""
    url = httpx.URL(live_api.base_url)
    assert url.port is not None
    received = b""
    sent = 0
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(get(RUNS, HOST, VIEWER, b"X-Endless: "))
        try:
            while sent < 1024 * 1024:
                sock.sendall(b"v" * 16384)
                sent += 16384
                time.sleep(0.001)  # separate reads, so that the head is seen incomplete
        except ConnectionError:
            pass
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    assert_refused(parse_answers(received), closed=True)
    assert sent < 1024 * 1024, "the whole MiB was accepted"
    assert_served(live_api)


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_pipelined_requests_are_answered_in_order(live_api: LiveApi) -> None:
    requests = (
        get(b"/livez", HOST, b"\r\n")
        + get(RUNS, HOST, VIEWER, b"\r\n")
        + get(b"/api/v1/workflows", HOST, VIEWER, CLOSE, b"\r\n")
    )
    answers, closed = exchange(live_api, requests)
    assert [a.status for a in answers] == [200, 200, 200], answers
    assert "items" in json.loads(answers[1].body)
    assert "items" in json.loads(answers[2].body)
    assert answers[1].body != answers[0].body
    assert closed


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_garbage_after_a_pipelined_request(live_api: LiveApi, api_settings: Settings) -> None:
    """The valid request is answered first; then h11 answers 400, httptools closes."""
    answers, closed = exchange(live_api, get(RUNS, HOST, VIEWER, b"\r\n") + b"\x00\x01junk\r\n\r\n")
    assert answers[0].status == 200, answers
    assert closed
    if api_settings.http_parser == "h11":
        assert_refused(answers[1:], closed)
    else:
        assert len(answers) == 1, answers
    assert_served(live_api)


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_a_kept_alive_connection_serves_request_after_request(live_api: LiveApi) -> None:
    url = httpx.URL(live_api.base_url)
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        for _ in range(3):
            answers = _runs_on(sock)
            assert [a.status for a in answers] == [200], answers
            assert answers[0].headers.get("connection") != "close"


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_an_idle_connection_outlives_the_pools_of_its_clients(live_api: LiveApi) -> None:
    """The service closes an idle connection after its clients' pools do (ADR 0041).

    httpx keeps an idle connection 5 s: left idle a second longer, the connection still serves.
    With a server that closed first, the client could send on a connection being closed.
    """
    client_idle = httpx.Limits().keepalive_expiry
    assert client_idle is not None
    url = httpx.URL(live_api.base_url)
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        for pause in (0.0, client_idle + 1.0):
            time.sleep(pause)
            readable, _, _ = select.select([sock], [], [], 0)
            assert not readable, "the service closed an idle connection its clients keep"
            answers = _runs_on(sock)
            assert [a.status for a in answers] == [200], answers


def _runs_on(sock: socket.socket) -> list[Answer]:
    """Send one read of the runs on a kept-alive connection; its answer, once complete."""
    sock.sendall(get(RUNS, HOST, VIEWER, b"\r\n"))
    received = b""
    while not (answers := _complete(received)):
        chunk = sock.recv(65536)
        assert chunk, "the service closed the connection before answering"
        received += chunk
    return answers


def _complete(received: bytes) -> list[Answer]:
    head, separator, rest = received.partition(b"\r\n\r\n")
    if not separator:
        return []
    length = [
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    return parse_answers(received) if length and len(rest) >= length[0] else []


def post_workflow(workflow_id: str, *headers: bytes) -> bytes:
    return (
        b"POST /api/v1/workflows HTTP/1.1\r\n"
        + HOST
        + OPERATOR
        + CLOSE
        + b"Content-Type: application/json\r\n"
        + f"Idempotency-Key: parser-{workflow_id}\r\n".encode()
        + b"".join(headers)
    )


def definition(workflow_id: str) -> bytes:
    return json.dumps({"id": workflow_id, "tasks": [{"key": "a", "action": "mock"}]}).encode()


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_expect_100_continue(live_api: LiveApi, api_settings: Settings) -> None:
    workflow_id = f"continue-{api_settings.http_parser}"
    body = definition(workflow_id)
    url = httpx.URL(live_api.base_url)
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(
            post_workflow(
                workflow_id, b"Expect: 100-continue\r\n", b"Content-Length: %d\r\n\r\n" % len(body)
            )
        )
        interim = sock.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100 "), interim
        sock.sendall(body)
        received = interim.partition(b"\r\n\r\n")[2]
        while chunk := sock.recv(65536):
            received += chunk
    answers = parse_answers(received)
    assert [a.status for a in answers] == [201], answers
    assert live_api.viewer.get(f"/api/v1/workflows/{workflow_id}").status_code == 200


def chunked(body: bytes, size: int) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return (
        b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\nX-Trailer: t\r\n\r\n"
    )


@pytest.mark.real_http_only
@BOTH_PARSERS
def test_a_chunked_body_is_read_whole(live_api: LiveApi, api_settings: Settings) -> None:
    workflow_id = f"chunked-{api_settings.http_parser}"
    request = post_workflow(workflow_id, b"Transfer-Encoding: chunked\r\n\r\n")
    answers, _ = exchange(live_api, request + chunked(definition(workflow_id), 7))
    assert [a.status for a in answers] == [201], answers
    assert live_api.viewer.get(f"/api/v1/workflows/{workflow_id}").status_code == 200


@pytest.mark.real_http_only
@BOTH_PARSERS
@pytest.mark.parametrize(
    "bad_chunk",
    [b"zz\r\nabc\r\n0\r\n\r\n", b"3\r\nabcdef\r\n0\r\n\r\n", b"-1\r\nabc\r\n"],
    ids=["size-not-hex", "chunk-longer-than-its-size", "negative-size"],
)
def test_a_malformed_chunked_body_is_refused(
    live_api: LiveApi, api_settings: Settings, bad_chunk: bytes
) -> None:
    """The handler is reading the body when the parser fails: 400, nothing written."""
    workflow_id = f"badchunk-{api_settings.http_parser}"
    body = definition(workflow_id)
    request = post_workflow(workflow_id, b"Transfer-Encoding: chunked\r\n\r\n")
    answers, closed = exchange(live_api, request + b"%x\r\n%s\r\n" % (10, body[:10]) + bad_chunk)
    assert_refused(answers, closed)
    assert live_api.viewer.get(f"/api/v1/workflows/{workflow_id}").status_code == 404
    assert_served(live_api)


@pytest.mark.parametrize("value", ["bogus", "H11", "h2", "", " "], ids=repr)
def test_an_unknown_http_parser_is_a_configuration_error(tmp_path: Path, value: str) -> None:
    done = _serve(tmp_path, env={"WORKLOAD_HTTP_PARSER": value})
    assert done.returncode == 2, done.stderr
    assert "http_parser" in done.stderr
    assert "Traceback" not in done.stderr


def test_httptools_is_the_default_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKLOAD_HTTP_PARSER", raising=False)
    assert Settings().http_parser == "httptools"
    monkeypatch.setenv("WORKLOAD_HTTP_PARSER", "h11")
    assert Settings().http_parser == "h11"


HEADER_TIMEOUT = 1.0


@pytest.mark.real_http_only
@pytest.mark.parametrize(
    "api_settings",
    [
        pytest.param(
            settings(
                http_parser=parser,
                http_header_timeout_seconds=HEADER_TIMEOUT,
                stream_keepalive_seconds=0.2,
            ),
            id=parser,
        )
        for parser in ("h11", "httptools")
    ],
)
def test_a_head_pipelined_behind_an_event_stream_does_not_cut_it(live_api: LiveApi) -> None:
    """The header timer of a head that begins while a stream is answered waits for its end.

    A client pipelines the first bytes of a next request behind an event stream: the stream
    goes on well past the header timeout (its keep-alive comments keep coming), and once the
    run ends and the stream with it, the unfinished head is closed by a timer.
    """
    run_id = remote_run(live_api, "pipelined-behind-a-stream")
    path = f"/api/v1/runs/{run_id}/events/stream".encode()
    url = httpx.URL(live_api.base_url)
    assert url.port is not None
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        sock.sendall(get(path, HOST, VIEWER, b"\r\n") + b"GET /livez HT")
        received = b""
        until = time.monotonic() + 3 * HEADER_TIMEOUT
        while (left := until - time.monotonic()) > 0:
            readable, _, _ = select.select([sock], [], [], left)
            if readable:
                chunk = sock.recv(65536)
                assert chunk, "the connection was closed while its stream was answered"
                received += chunk
        assert received.startswith(b"HTTP/1.1 200 "), received[:200]
        comments_before = received.count(b": keep-alive")
        canceled = live_api.operator.post(
            f"/api/v1/runs/{run_id}/cancel", headers={"Idempotency-Key": "pipelined-cancel"}
        )
        assert canceled.status_code == 202, canceled.text

        def closed() -> bool:
            nonlocal received
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            chunk = sock.recv(65536)
            received += chunk
            return chunk == b""

        wait_until(closed, timeout=20, interval=0.05, message="the unfinished head was kept")
    assert comments_before >= 2, received[:400]
    assert b"run.canceled" in received, received[-400:]
    assert_served(live_api)

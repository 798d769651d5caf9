"""Slow request bodies and too many connections, against a real service over real sockets.

Issue 33, finding D2: a body sent at one byte every 2 s held ``/ui/login`` (and any POST) open
for as long as the client liked, the console read a POST's form before it checked anything, and
nothing bounded the number of connections. Now (ADR 0024) a body must arrive within
``WORKLOAD_HTTP_BODY_TIMEOUT_SECONDS`` of its headers (else 408 ``request_timeout`` and the
connection closes), a console POST without a session or sign-in cookie is refused unread, and
``WORKLOAD_HTTP_MAX_CONNECTIONS`` is uvicorn's ``limit_concurrency``.
"""

from __future__ import annotations

import json
import select
import socket
import time

import httpx
import pytest

from tests.fault.conftest import OPERATOR_TOKEN, PgCluster, Service, Services
from tests.fault.test_reliability import HTTP_PARSERS, access_records, assert_no_server_errors
from tests.tls import shared_tls
from tests.waiting import wait_until

BODY_TIMEOUT = 3.0
TRICKLE_INTERVAL = 2.0  # one byte every 2 s, as in the finding
MARGIN = 2.5
"""How long past the deadline a cut may come (a busy machine's scheduling, one trickle step)."""
SLOW_BODY_ENV = {"WORKLOAD_HTTP_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT)}
DECLARED_LENGTH = 100  # more than the test ever sends


def _head(path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {DECLARED_LENGTH}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")


def _send_slowly(service: Service, head: bytes, *, limit: float) -> tuple[bytes, float, bool]:
    """Send ``head``, then the body one byte every 2 s; the answer and when the server closed.

    Returns what the server sent, the seconds from the end of the headers until it closed the
    connection (or ``limit`` passed), and whether the server closed it.
    """
    answer = b""
    closed = False
    with socket.create_connection(("127.0.0.1", service.port), timeout=5) as sock:
        sock.sendall(head)
        started = time.monotonic()
        for _ in range(int(limit / TRICKLE_INTERVAL) + 2):  # bounded: at most ``limit`` seconds
            remaining = limit - (time.monotonic() - started)
            if remaining <= 0:
                break
            readable, _, _ = select.select([sock], [], [], min(TRICKLE_INTERVAL, remaining))
            if readable:
                try:
                    chunk = sock.recv(65536)
                except ConnectionError:
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                answer += chunk
                continue
            try:
                sock.sendall(b"x")
            except ConnectionError:
                closed = True
                break
        return answer, time.monotonic() - started, closed


def _status_and_headers(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), answer[:200]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def _login_cookie(service: Service) -> str:
    page = httpx.get(f"{service.base_url}/ui/login", timeout=10, verify=shared_tls())
    assert page.status_code == 200, page.text
    nonce = page.cookies.get("workload_login")
    assert nonce, page.headers
    return nonce


@pytest.mark.parametrize("parser", HTTP_PARSERS)
@pytest.mark.parametrize("route", ["api-workflows", "ui-login"])
def test_a_slow_body_is_cut_at_its_deadline(
    pg: PgCluster, database_url: str, services: Services, route: str, parser: str
) -> None:
    service = services.start(database_url, env={**SLOW_BODY_ENV, "WORKLOAD_HTTP_PARSER": parser})
    service.wait_ready()
    if route == "api-workflows":
        head = _head(
            "/api/v1/workflows",
            {
                "Authorization": f"Bearer {OPERATOR_TOKEN}",
                "Content-Type": "application/json",
                "Idempotency-Key": "slow-body-1",
            },
        )
    else:
        head = _head(
            "/ui/login",
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Cookie": f"workload_login={_login_cookie(service)}",
            },
        )
    answer, closed_after, closed = _send_slowly(service, head, limit=BODY_TIMEOUT + MARGIN + 10)
    assert answer, f"no answer in {closed_after:.1f} s\n{service.stderr_tail()}"
    status, headers, body = _status_and_headers(answer)
    assert status == 408, answer[:400]
    assert headers.get("connection") == "close", headers
    assert closed, f"the connection was still open after {closed_after:.1f} s"
    assert closed_after <= BODY_TIMEOUT + MARGIN, f"cut after {closed_after:.1f} s"
    assert closed_after >= BODY_TIMEOUT * 0.9, f"cut after {closed_after:.1f} s, before its time"
    if route == "api-workflows":
        assert headers["content-type"] == "application/problem+json", headers
        assert json.loads(body)["code"] == "request_timeout"
    else:
        assert headers["content-type"].startswith("text/html"), headers
    lines = [r for r in access_records(service) if r["status"] == 408]
    assert [r["error_code"] for r in lines] == ["request_timeout"], service.stderr_tail()
    assert service.client().get("/api/v1/workflows").status_code == 200
    assert_no_server_errors(service)


@pytest.mark.parametrize("parser", HTTP_PARSERS)
@pytest.mark.parametrize("route", ["ui-logout-without-session", "ui-login-without-cookie"])
def test_a_console_post_without_session_is_refused_unread(
    pg: PgCluster, database_url: str, services: Services, route: str, parser: str
) -> None:
    # A long body deadline: an answer only after the whole body (or the deadline) would show.
    env = {"WORKLOAD_HTTP_BODY_TIMEOUT_SECONDS": "60", "WORKLOAD_HTTP_PARSER": parser}
    service = services.start(database_url, env=env)
    service.wait_ready()
    path = "/ui/logout" if route == "ui-logout-without-session" else "/ui/login"
    head = _head(path, {"Content-Type": "application/x-www-form-urlencoded"})
    answer, closed_after, closed = _send_slowly(service, head, limit=15)
    assert answer, f"no answer in {closed_after:.1f} s\n{service.stderr_tail()}"
    status, headers, _ = _status_and_headers(answer)
    assert status == 403, answer[:400]
    # Answered unread, and the connection closed: the server does not wait for a body nobody
    # wants (it held the connection until the body deadline before).
    assert headers.get("connection") == "close", headers
    assert closed, f"the connection was still open after {closed_after:.1f} s"
    lines = [r for r in access_records(service) if r["status"] == 403]
    assert [r["error_code"] for r in lines] == ["csrf_failed"], service.stderr_tail()
    assert_no_server_errors(service)


MAX_CONNECTIONS = 3


@pytest.mark.parametrize("parser", HTTP_PARSERS)
def test_connections_past_the_limit_are_answered_503(
    pg: PgCluster, database_url: str, services: Services, parser: str
) -> None:
    env = {"WORKLOAD_HTTP_MAX_CONNECTIONS": str(MAX_CONNECTIONS), "WORKLOAD_HTTP_PARSER": parser}
    service = services.start(database_url, env=env)
    service.wait_ready()
    held = [
        socket.create_connection(("127.0.0.1", service.port), timeout=5)
        for _ in range(MAX_CONNECTIONS - 1)
    ]
    try:
        # uvicorn counts the asking connection too: with the others held, it is one too many.
        with httpx.Client(base_url=service.base_url, timeout=10, verify=shared_tls()) as client:
            refused = client.get("/livez")
        assert refused.status_code == 503, refused.text
    finally:
        for sock in held:
            sock.close()

    def served() -> bool:
        with httpx.Client(base_url=service.base_url, timeout=10, verify=shared_tls()) as client:
            return client.get("/livez").status_code == 200

    wait_until(served, timeout=10, interval=0.05, message="not served after the others closed")


def test_a_hostile_tracestate_writes_no_line_of_its_own(
    services: Services, database_url: str
) -> None:
    # OpenTelemetry warned, as plain text, quoting any tracestate member it drops: a line any
    # client could write into the service's JSON log, once per request, without a token.
    service = services.start(database_url)
    service.wait_ready()
    forged = '{"level": "error", "message": "forged: the operator token is s3cr3t"}'
    headers = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": f"x={forged} " + "Z" * 200,
    }
    for path in ("/livez", "/readyz", "/api/v1/workflows"):
        answer = httpx.get(f"{service.base_url}{path}", headers=headers, verify=shared_tls())
        assert answer.status_code in (200, 401)
    wait_until(lambda: len(access_records(service)) >= 3, message="the requests were not logged")
    written = service.stderr()
    assert "forged" not in written
    assert "w3c identifiers" not in written

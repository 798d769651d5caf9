"""Per-call ``timeout=`` and ``extra_headers=`` on every public method; ``http_client=``.

Every public method of both clients is called with both options, and every request it sent is
checked on the wire (the ``timeout`` request extension is what httpx's transports obey). A table
names a call for each method, and a test fails when a method has no row: a method added without
the options cannot slip through.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.sdk.fakes import (
    APPROVAL_ID,
    BASE,
    DEFINITION,
    DRAFT_ID,
    RUN_ID,
    FakeApi,
    canned,
    json_response,
    run_body,
)
from workload_sdk import AsyncClient, Client
from workload_sdk._worker_requests import CLAIM_READ_MARGIN

HEADERS = {"X-Call": "per-call", "User-Agent": "mine/1.0"}
TIMEOUT = 3.5
WITH_TIMEOUT = {"connect": TIMEOUT, "read": TIMEOUT, "write": TIMEOUT, "pool": TIMEOUT}
DEFAULT_TIMEOUT = {"connect": 30.0, "read": 30.0, "write": 30.0, "pool": 30.0}

# method → (positional args, keyword args). Waits take the deadline as ``timeout``: they get
# the extra headers only (WAITS), and their polls keep the client's HTTP timeout.
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "workflows.create": ((DEFINITION,), {}),
    "workflows.apply": ((DEFINITION,), {}),
    "workflows.list": ((), {}),
    "workflows.list_page": ((), {}),
    "workflows.get": (("wf",), {}),
    "versions.create": (("wf", DEFINITION), {}),
    "versions.list": (("wf",), {}),
    "versions.list_page": (("wf",), {}),
    "versions.get": (("wf", 1), {}),
    "runs.start": (("wf", {"doc": 1}), {}),
    "runs.list": ((), {}),
    "runs.list_page": ((), {}),
    "runs.get": ((RUN_ID,), {}),
    "runs.get_with_etag": ((RUN_ID,), {}),
    "runs.cancel": ((RUN_ID,), {"if_revision": 1}),
    "runs.tasks": ((RUN_ID,), {}),
    "runs.tasks_page": ((RUN_ID,), {}),
    "runs.task": ((RUN_ID, "a"), {}),
    "runs.attempts": ((RUN_ID, "a"), {}),
    "runs.attempts_page": ((RUN_ID, "a"), {}),
    "runs.steps": ((RUN_ID, "a"), {}),
    "runs.steps_page": ((RUN_ID, "a"), {}),
    "runs.events": ((RUN_ID,), {}),
    "runs.events_page": ((RUN_ID,), {}),
    "runs.stream_events": ((RUN_ID,), {}),
    "runs.wait": ((RUN_ID,), {}),
    "runs.result": ((RUN_ID,), {}),
    "approvals.list": ((), {}),
    "approvals.list_page": ((), {}),
    "approvals.get": ((APPROVAL_ID,), {}),
    "approvals.approve": ((APPROVAL_ID, "sha256:x"), {}),
    "approvals.reject": ((APPROVAL_ID, "sha256:x"), {}),
    "drafts.create": (("a prompt",), {}),
    "drafts.list": ((), {}),
    "drafts.list_page": ((), {}),
    "drafts.get": ((DRAFT_ID,), {}),
    "drafts.approve": ((DRAFT_ID, "sha256:x"), {}),
    "drafts.reject": ((DRAFT_ID,), {}),
    "drafts.wait": ((DRAFT_ID,), {}),
    "attempts.claim": (("w-1", ["default"], ["resize"]), {"wait_seconds": 0}),
    "attempts.heartbeat": (("att-1", "lease"), {}),
    "attempts.complete": (("att-1", "lease", {"ok": True}), {}),
    "attempts.fail": (("att-1", "lease", "boom", "it broke"), {}),
    "workers.list": ((), {}),
    "workers.list_page": ((), {}),
    "queues.list": ((), {}),
    "cluster.get": ((), {}),
    "status": ((), {}),
    "wait_for_run": ((RUN_ID,), {}),
}
WAITS = frozenset({"runs.stream_events", "runs.wait", "runs.result", "drafts.wait", "wait_for_run"})
NOT_CALLS = frozenset({"close"})


def public_methods(client_class: type[Any]) -> set[str]:
    """``resource.method`` for every public method of every resource, and the client's own."""
    names = {
        name
        for name, value in vars(client_class).items()
        if callable(value) and not name.startswith("_") and name not in NOT_CALLS
    }
    for attribute, resource in typing.get_type_hints(client_class).items():
        # A resource's parts too (``Runs(RunTasks)``): every class of it but ``object``.
        own = {k: v for part in resource.__mro__[:-1] for k, v in vars(part).items()}
        names |= {
            f"{attribute}.{name}"
            for name, value in own.items()
            if callable(value) and not name.startswith("_")
        }
    return names


@pytest.mark.parametrize("client_class", [Client, AsyncClient])
def test_the_table_names_every_public_method(client_class: type[Any]) -> None:
    assert public_methods(client_class) == set(CALLS)


def finished_runs(request: httpx.Request) -> httpx.Response:
    """The canned API, with the run succeeded (so that waits end at once)."""
    if request.method == "GET" and request.url.path == f"/api/v1/runs/{RUN_ID}":
        return json_response(200, run_body("succeeded", 3, output={"a": {}}), etag='"3"')
    return canned(request)


def resolve(client: Any, name: str) -> Callable[..., Any]:
    target = client
    for part in name.split("."):
        target = getattr(target, part)
    method: Callable[..., Any] = target
    return method


def options(name: str) -> dict[str, Any]:
    if name in WAITS:
        return {"extra_headers": HEADERS}
    return {"timeout": TIMEOUT, "extra_headers": HEADERS}


def check_wire(name: str, api: FakeApi) -> None:
    assert api.requests, f"{name} sent nothing"
    for request in api.requests:
        assert request.headers["x-call"] == "per-call", name
        assert request.headers["user-agent"] == "mine/1.0", name  # over the SDK's own
        assert request.headers["authorization"] == "Bearer tok", name  # the SDK's still
        expected = DEFAULT_TIMEOUT if name in WAITS else dict(WITH_TIMEOUT)
        if name == "attempts.claim":  # a claim's read timeout outlasts its wait
            expected["read"] = CLAIM_READ_MARGIN
        if request.url.path.endswith("/events/stream"):
            continue  # a stream's read timeout is its own (keep-alives)
        assert request.extensions["timeout"] == expected, name


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_sync_method_sends_the_calls_timeout_and_headers(name: str) -> None:
    api = FakeApi(finished_runs)
    args, kwargs = CALLS[name]
    with Client(base_url=BASE, token="tok", transport=api.transport) as client:
        result = resolve(client, name)(*args, **kwargs, **options(name))
        if inspect.isgenerator(result) or hasattr(result, "__next__"):
            list(result)
    check_wire(name, api)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_async_method_sends_the_calls_timeout_and_headers(name: str) -> None:
    api = FakeApi(finished_runs)
    args, kwargs = CALLS[name]

    async def call() -> None:
        async with AsyncClient(base_url=BASE, token="tok", transport=api.transport) as client:
            result = resolve(client, name)(*args, **kwargs, **options(name))
            if inspect.isawaitable(result):
                await result
            else:  # an AsyncPager or an async generator
                assert hasattr(result, "__anext__"), name
                _ = [item async for item in result]

    asyncio.run(call())
    check_wire(name, api)


def test_without_options_the_clients_timeout_applies() -> None:
    api = FakeApi()
    with Client(base_url=BASE, transport=api.transport, timeout=7) as client:
        client.runs.get(RUN_ID)
        client.runs.get(RUN_ID, timeout=httpx.Timeout(1.0, read=None))
    assert api.requests[0].extensions["timeout"]["read"] == 7
    assert api.requests[1].extensions["timeout"] == {
        "connect": 1.0,
        "read": None,
        "write": 1.0,
        "pool": 1.0,
    }


def test_a_requests_own_headers_win_over_extra_headers() -> None:
    api = FakeApi()
    with Client(base_url=BASE, transport=api.transport) as client:
        client.runs.cancel(RUN_ID, if_revision=3, extra_headers={"If-Match": '"99"'})
        list(client.runs.stream_events(RUN_ID, extra_headers={"accept": "application/json"}))
    assert api.requests[0].headers.get_list("if-match") == ['"3"']
    assert api.requests[1].headers.get_list("accept") == ["text/event-stream"]


@pytest.mark.parametrize(
    ("given", "error"),
    [
        pytest.param({"timeout": "10"}, TypeError, id="timeout-text"),
        pytest.param({"timeout": True}, TypeError, id="timeout-bool"),
        pytest.param({"extra_headers": {"X-N": 1}}, TypeError, id="header-not-text"),
        pytest.param({"extra_headers": {"Idempotency-Key": "k"}}, ValueError, id="idempotency"),
        pytest.param({"extra_headers": {"idempotency-KEY": "k"}}, ValueError, id="any-case"),
    ],
)
def test_bad_options_are_refused_before_anything_is_sent(
    given: dict[str, Any], error: type[Exception]
) -> None:
    api = FakeApi()
    with Client(base_url=BASE, transport=api.transport) as client, pytest.raises(error):
        client.runs.start("wf", version=1, **given)
    assert api.requests == []


# -- http_client= ---------------------------------------------------------------------------------


def test_a_callers_http_client_is_used_as_it_is_and_never_closed() -> None:
    api = FakeApi()
    seen: list[str] = []
    mine = httpx.Client(
        transport=api.transport,
        headers={"X-Team": "search", "Authorization": "Bearer not-this"},
        event_hooks={"request": [lambda request: seen.append(request.url.path)]},
        base_url="http://ignored.test",
    )
    with Client(base_url=BASE, token="tok", http_client=mine) as client:
        client.runs.get(RUN_ID)
        client.workflows.apply(DEFINITION)
    assert not mine.is_closed  # the caller's to close
    request = api.requests[0]
    assert str(request.url) == f"{BASE}/api/v1/runs/{RUN_ID}"  # the SDK's URL
    assert request.headers["x-team"] == "search"  # the caller's header kept
    assert request.headers["authorization"] == "Bearer tok"  # the SDK's token wins
    assert request.extensions["timeout"]["read"] == 30.0  # the SDK's timeout
    assert seen == [f"/api/v1/runs/{RUN_ID}", "/api/v1/workflows/wf"]  # its hooks ran
    mine.get(f"{BASE}/api/v1/queues")  # still usable
    mine.close()


def test_a_callers_async_http_client_is_used_and_never_closed() -> None:
    api = FakeApi()

    async def main() -> httpx.AsyncClient:
        mine = httpx.AsyncClient(transport=api.transport, headers={"X-Team": "search"})
        async with AsyncClient(base_url=BASE, token="tok", http_client=mine) as client:
            await client.runs.start("wf", version=1)
        assert not mine.is_closed
        await mine.aclose()
        return mine

    asyncio.run(main())
    assert api.last.headers["x-team"] == "search"
    assert api.last.headers["authorization"] == "Bearer tok"


def test_the_sdks_own_http_client_is_closed_with_it() -> None:
    client = Client(base_url=BASE, transport=FakeApi().transport)
    client.close()
    assert client._http.is_closed  # what close() owns


@pytest.mark.parametrize(
    ("make", "given", "error"),
    [
        pytest.param(Client, httpx.AsyncClient, TypeError, id="sync-given-async"),
        pytest.param(AsyncClient, httpx.Client, TypeError, id="async-given-sync"),
        pytest.param(Client, lambda: "http://x", TypeError, id="a-url"),
    ],
)
def test_an_http_client_of_the_wrong_kind_is_refused(
    make: type[Any], given: Callable[[], Any], error: type[Exception]
) -> None:
    with pytest.raises(error, match="http_client"):
        make(base_url=BASE, http_client=given())


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param({"transport": httpx.MockTransport(canned)}, id="transport"),
        pytest.param({"max_connections": 4}, id="max-connections"),
    ],
)
def test_an_http_client_excludes_the_options_of_the_sdks_own(extra: dict[str, Any]) -> None:
    mine = httpx.Client()
    with pytest.raises(ValueError, match="http_client"):
        Client(base_url=BASE, http_client=mine, **extra)
    mine.close()

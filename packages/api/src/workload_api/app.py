"""The Starlette application: routes from the operations table, problems for every error."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from workload_api.auth import Authenticator
from workload_api.context import RequestContext
from workload_api.openapi import openapi_document
from workload_api.operations import OPERATIONS, Call, Operation
from workload_api.problems import HttpProblem, problem_for, problem_response
from workload_api.service import ControlPlane
from workload_domain.errors import WorkloadError
from workload_domain.idempotency import Replay

__all__ = ["Readiness", "create_app", "serve_engine"]

_errors = logging.getLogger("workload.errors")


class Readiness:
    """Whether the service is ready; the coordinator flips it (503 before and after)."""

    def __init__(self, ready: bool = False) -> None:
        self.ready = ready
        self.reason = "starting"


class _Lifecycle(Protocol):
    def __call__(self, app: Starlette) -> contextlib.AbstractAsyncContextManager[None]: ...


def _request_id(request: Request) -> str:
    value: str = request.state.request_id
    return value


def _endpoint(
    op: Operation, control_plane: ControlPlane, authenticator: Authenticator
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        request.state.route = op.path
        try:
            principal = authenticator.authenticate(request.headers.get("authorization"), op.role)
            call = Call(request, principal, control_plane)
            return await op.handler(call)
        except Replay as replay:
            headers = {"Idempotent-Replayed": "true"}
            if "run_id" in replay.outcome.body and op.operation_id == "startRun":
                headers["Location"] = f"/api/v1/runs/{replay.outcome.body['run_id']}"
            return JSONResponse(
                replay.outcome.body, status_code=replay.outcome.status_code, headers=headers
            )
        except HttpProblem as problem:
            request.state.error_code = problem.code
            return problem_response(problem, _request_id(request))
        except WorkloadError as error:
            mapped = problem_for(error)
            request.state.error_code = mapped.code
            if mapped.status >= 500:
                _errors.error(
                    "request failed",
                    exc_info=error,
                    extra={"fields": {"request_id": _request_id(request), "code": error.code}},
                )
            return problem_response(mapped, _request_id(request))

    return endpoint


def create_app(
    control_plane: ControlPlane,
    authenticator: Authenticator,
    readiness: Readiness,
    lifespan: _Lifecycle | None = None,
) -> Starlette:
    """Build the ASGI application over the given services."""
    document = openapi_document()

    async def openapi(request: Request) -> Response:
        request.state.route = "/api/v1/openapi.json"
        return JSONResponse(document)

    async def livez(request: Request) -> Response:
        request.state.route = "/livez"
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        request.state.route = "/readyz"
        if readiness.ready:
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": readiness.reason}, status_code=503)

    # One route per path with every method of that path, so a 405 lists them all in Allow.
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for op in OPERATIONS:
        by_path.setdefault(op.path, {})[op.method] = _endpoint(op, control_plane, authenticator)
    routes = [
        Route(path, _dispatch(endpoints), methods=list(endpoints))
        for path, endpoints in by_path.items()
    ]
    routes += [
        Route("/api/v1/openapi.json", openapi, methods=["GET"]),
        Route("/livez", livez, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            problem = HttpProblem(
                405,
                "method_not_allowed",
                f"{request.method} is not allowed here",
                headers=dict(exc.headers or {}),
            )
        elif exc.status_code == 404:
            problem = HttpProblem(404, "not_found", "no such resource")
        else:
            problem = HttpProblem(exc.status_code, "invalid_argument", str(exc.detail))
        request.state.error_code = problem.code
        return problem_response(problem, _request_id(request))

    app = Starlette(
        routes=routes,
        middleware=[Middleware(RequestContext)],
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    # "/x/" is not "/x": a redirect would be built from the client's Host header.
    app.router.redirect_slashes = False
    return app


def _dispatch(
    endpoints: dict[str, Callable[[Request], Awaitable[Response]]],
) -> Callable[[Request], Awaitable[Response]]:
    async def dispatch(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await endpoints[method](request)

    return dispatch


@contextlib.asynccontextmanager
async def serve_engine(control_plane: ControlPlane, readiness: Readiness) -> AsyncIterator[None]:
    """Open the store, run the engine and recover unfinished runs; ready while inside.

    The coordinator of ``workload serve`` adds the advisory lock and fail-stop around this.
    """
    store: Any = control_plane.store
    opener = getattr(store, "open", None)
    if opener is not None:
        await opener()
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(control_plane.engine.run)
            await control_plane.engine.recover()
            readiness.ready = True
            readiness.reason = "ready"
            try:
                yield
            finally:
                readiness.ready = False
                readiness.reason = "stopping"
                tg.cancel_scope.cancel()
    finally:
        closer = getattr(store, "close", None)
        if closer is not None:
            await closer()

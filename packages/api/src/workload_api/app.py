"""The Starlette application: routes from the operations table, problems for every error."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from workload_api._body_deadline import BodyDeadline
from workload_api.auth import Authenticator, Principal, Role
from workload_api.console import CONSOLE_PREFIX, Console, SecurityHeaders
from workload_api.console import routes as console_routes
from workload_api.console._sessions import SESSION_COOKIE
from workload_api.context import OneSegmentIds, RequestContext
from workload_api.handlers import check_query_names
from workload_api.openapi import openapi_document
from workload_api.operations import OPERATIONS, Call, Operation
from workload_api.problems import HttpProblem, problem_for, problem_response
from workload_api.readiness import Readiness
from workload_api.telemetry import HttpTelemetry, ServiceTelemetry
from workload_api.usecases import UseCases
from workload_domain.errors import WorkloadError
from workload_domain.telemetry import Telemetry

__all__ = ["METRICS_CONTENT_TYPE", "create_app"]

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format."""

_errors = logging.getLogger("workload.errors")


def _request_id(request: Request) -> str:
    value: str = request.state.request_id
    return value


def _endpoint(
    op: Operation, usecases: UseCases, authenticator: Authenticator, console: Console | None
) -> Callable[[Request], Awaitable[Response]]:
    async def principal_of(request: Request) -> Principal:
        authorization = request.headers.get("authorization")
        if op.session and console is not None and authorization is None:
            # The console's browser (an EventSource sends no headers): its session cookie.
            session = await console.sessions.read(request.cookies.get(SESSION_COOKIE))
            if session is not None:
                return authenticator.check(session.principal, op.role)
        return await authenticator.authenticate(authorization, op.role)

    accepted = frozenset(param.name for param in op.query)

    async def endpoint(request: Request) -> Response:
        request.state.route = op.path
        try:
            principal = await principal_of(request)
            check_query_names(request.query_params, accepted)
            return await op.handler(Call(request, principal, usecases))
        except HttpProblem as problem:
            request.state.error_code = problem.code
            return problem_response(problem, _request_id(request))
        except WorkloadError as error:
            mapped = problem_for(error)
            request.state.error_code = mapped.code
            if mapped.status >= 500:
                # A 503 is the service unavailable for now (the database away, a busy run), as
                # designed; a 500 is a bug.
                _errors.log(
                    logging.WARNING if mapped.status == 503 else logging.ERROR,
                    "request failed",
                    exc_info=error,
                    extra={"fields": {"request_id": _request_id(request), "code": error.code}},
                )
            return problem_response(mapped, _request_id(request))

    return endpoint


def create_app(
    *,
    usecases: UseCases,
    authenticator: Authenticator,
    readiness: Readiness,
    telemetry: Telemetry,
    metrics_public: bool = False,
    console: Console | None = None,
    body_timeout: float = 60.0,
) -> Starlette:
    """Build the ASGI application over the use cases (and the web console, when given).

    The application has no lifespan of its own: the service's one lifecycle
    (:class:`~workload_api.lifecycle.Service`) runs around it, in production and in tests.
    ``metrics_public`` serves ``/metrics`` without a token (else a viewer's is needed).
    ``body_timeout`` bounds the time a request's body may take (408, ADR 0024).
    HTTP spans and metrics are recorded when ``telemetry`` is the service's (not with the
    no-op telemetry a benchmark measures against).
    """
    document: dict[str, Any] | None = None

    async def openapi(request: Request) -> Response:
        nonlocal document
        request.state.route = "/api/v1/openapi.json"
        if document is None:  # built at the first request, not at every start (tens of ms)
            document = openapi_document()
        return JSONResponse(document)

    async def livez(request: Request) -> Response:
        request.state.route = "/livez"
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        request.state.route = "/readyz"
        body: dict[str, Any] = {"role": readiness.role, "epoch": readiness.epoch}
        if readiness.replica_id is not None:  # SPEC §16
            body = {
                "role": "replica",
                "replica_id": readiness.replica_id,
                "shards_owned": readiness.shards_owned,
            }
        if readiness.ready:
            return JSONResponse({"status": "ready", **body})
        return JSONResponse({"status": readiness.reason, **body}, status_code=503)

    async def metrics(request: Request) -> Response:
        request.state.route = "/metrics"
        try:
            if not metrics_public:
                authenticator.authorize(request.headers.get("authorization"), Role.VIEWER)
        except HttpProblem as problem:
            request.state.error_code = problem.code
            return problem_response(problem, _request_id(request))
        text = await usecases.status.metrics()
        return Response(text, media_type=METRICS_CONTENT_TYPE)

    # One route per path with every method of that path, so a 405 lists them all in Allow.
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for op in OPERATIONS:
        by_path.setdefault(op.path, {})[op.method] = _endpoint(op, usecases, authenticator, console)
    routes = [
        Route(path, _dispatch(endpoints), methods=list(endpoints))
        for path, endpoints in by_path.items()
    ]
    routes += [
        Route("/api/v1/openapi.json", openapi, methods=["GET"]),
        Route("/livez", livez, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    if console is not None:
        routes += console_routes(console)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        # A console address a person typed or followed is answered by a page, not problem+json.
        in_console = console is not None and request.url.path.startswith(CONSOLE_PREFIX + "/")
        if exc.status_code == 405:
            problem = HttpProblem(
                405,
                "method_not_allowed",
                f"{request.method} is not allowed here",
                headers=dict(exc.headers or {}),
            )
            if console is not None and in_console:
                request.state.error_code = problem.code
                detail = "This address of the console does not take that request (use its form)."
                page = await console.error(request, 405, detail)
                page.headers.update(problem.headers)  # Allow
                return page
        elif exc.status_code == 404:
            problem = HttpProblem(404, "not_found", "no such resource")
            if console is not None and in_console:
                request.state.error_code = problem.code
                return await console.error(request, 404, "There is no such page in the console.")
        else:
            problem = HttpProblem(exc.status_code, "invalid_argument", str(exc.detail))
        request.state.error_code = problem.code
        return problem_response(problem, _request_id(request))

    # The span and the metrics outside: the access log line is written inside the span.
    middleware = [
        Middleware(RequestContext),
        Middleware(BodyDeadline, timeout=body_timeout),
        Middleware(SecurityHeaders),
        Middleware(OneSegmentIds),
    ]
    if isinstance(telemetry, ServiceTelemetry):
        middleware.insert(0, Middleware(HttpTelemetry, telemetry=telemetry))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
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

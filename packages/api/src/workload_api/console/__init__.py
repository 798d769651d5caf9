"""The web console (SPEC §13): server-rendered pages under ``/ui/``, served by the API process.

Pages are Jinja2 templates rendered from the same use cases as the API; ``static/console.js``
(hand-written, no library, no build step) keeps them live; nothing loads from another origin.
Each area is a module with its routes, listed in :data:`PAGES` with its entry in :data:`NAV`
(the approvals inbox and drafts of SPEC §11 are two of them; agent steps are on a run's page).
See docs/adr/0011-web-console.md.
"""

from __future__ import annotations

from importlib import resources
from types import ModuleType

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from workload_api.console import (
    approvals,
    cluster,
    drafts,
    raw,
    runs,
    signin,
    workers,
    workflows,
)
from workload_api.console._headers import CONSOLE_PREFIX, SecurityHeaders
from workload_api.console._sessions import Sessions
from workload_api.console._web import Console, NavEntry
from workload_api.problems import HttpProblem, problem_response

__all__ = ["CONSOLE_PREFIX", "NAV", "PAGES", "Console", "SecurityHeaders", "Sessions", "routes"]

NAV: tuple[NavEntry, ...] = (
    NavEntry("Runs", "/ui/runs", "runs"),
    NavEntry("Approvals", "/ui/approvals", "approvals"),
    NavEntry("Workflows", "/ui/workflows", "workflows"),
    NavEntry("Drafts", "/ui/drafts", "drafts"),
    NavEntry("Workers and queues", "/ui/workers", "workers"),
    NavEntry("Cluster", "/ui/cluster", "cluster"),
)
"""The navigation, in order."""

PAGES: tuple[ModuleType, ...] = (
    signin,
    runs,
    raw,
    approvals,
    workflows,
    drafts,
    workers,
    cluster,
)
"""The modules whose ``routes(console)`` make up the console."""

_STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "favicon.png": "image/png",
}


async def _static(request: Request) -> Response:
    request.state.route = "/ui/static/{name}"
    name = request.path_params["name"]
    media = _STATIC.get(name)
    if media is None:
        request.state.error_code = "not_found"
        return problem_response(
            HttpProblem(404, "not_found", "no such file"), request.state.request_id
        )
    body = resources.files("workload_api.console").joinpath("static", name).read_bytes()
    return Response(body, media_type=media, headers={"Cache-Control": "no-cache"})


def routes(console: Console) -> list[Route]:
    """Every route of the console."""
    found = [Route("/ui/static/{name}", _static, methods=["GET"])]
    for module in PAGES:
        found.extend(module.routes(console))
    return found

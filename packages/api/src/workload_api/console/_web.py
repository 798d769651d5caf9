"""What every console page shares: templates, the sign-in guard, CSRF, forms and errors.

:meth:`Console.page` wraps a page handler: it reads the session cookie (a GET without one is
sent to the sign-in page), checks a POST's CSRF token *before* anything else, checks the role
(viewers may not write: 403), and renders domain errors as HTML pages with the API's statuses.
Handlers get a :class:`View` and call the same use cases as the API's handlers. Jinja2 and the
templates load at the first page rendered, not when the service starts.

A page is rendered on a worker thread, not on the event loop (ADR 0026): a run's page with many
values takes milliseconds to write, and the loop serves every other request, stream and claim
meanwhile. Each render gets its own :class:`~workload_api.console._values.Previews` (``values``
in the templates), which bounds what the page shows of its values.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, urlencode

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Principal, Role
from workload_api.console._sessions import SESSION_COOKIE, Session, Sessions
from workload_api.jsonbody import MAX_BODY_BYTES, read_limited
from workload_api.problems import HttpProblem, problem_for
from workload_api.usecases import UseCases
from workload_domain.definition import WORKFLOW_ID_PATTERN
from workload_domain.errors import InvalidInput, WorkflowNotFound, WorkloadError
from workload_domain.idempotency import IdempotencyClaim, request_hash
from workload_domain.ports import Clock

if TYPE_CHECKING:
    import jinja2

__all__ = ["WORKFLOW_ID_INPUT_PATTERN", "Console", "NavEntry", "View", "exact_json", "said"]

_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")
_FORM_TYPE = "application/x-www-form-urlencoded"
_SAFE_NEXT = re.compile(r"^/ui/[A-Za-z0-9._~/?=&%-]*$")
_WORKFLOW_ID = re.compile(WORKFLOW_ID_PATTERN)
WORKFLOW_ID_INPUT_PATTERN = WORKFLOW_ID_PATTERN.strip("^$").replace("-]", r"\-]")
"""The workflow id pattern for an ``<input pattern>``: browsers compile it with the ``v`` flag,
where a class's unescaped ``-`` is a syntax error (and the browser then never validates)."""


@dataclass(frozen=True, slots=True)
class NavEntry:
    """An entry of the console's navigation."""

    label: str
    href: str
    section: str


@dataclass
class View:
    """What a page handler gets: the request, the session, its CSRF token, the form."""

    request: Request
    session: Session
    csrf: str
    console: Console
    form: Mapping[str, str] = field(default_factory=dict)

    @property
    def principal(self) -> Principal:
        """Who is signed in."""
        return self.session.principal

    @property
    def can_write(self) -> bool:
        """Whether write controls are shown (operators only; the server checks again)."""
        return self.principal.role.allows(Role.OPERATOR)

    def path(self, name: str) -> str:
        """A path parameter."""
        value: str = self.request.path_params[name]
        return value

    def claim(self, operation: str, body: Any) -> IdempotencyClaim:
        """The idempotency claim of a console write: the form's key (a double submit replays)."""
        key = self.form.get("idempotency_key", "")
        if not _IDEMPOTENCY_KEY.fullmatch(key):
            key = new_form_key()
        digest = request_hash(operation, dict(self.request.path_params), body)
        return IdempotencyClaim(self.principal.id, key, operation, digest)

    async def render(self, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        """A page for this view's user."""
        return await self.console.render(
            self.request, template, status=status, view=self, **context
        )


def new_form_key() -> str:
    """A fresh idempotency key for a form (rendered into it as a hidden field)."""
    return secrets.token_urlsafe(18)


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def exact_json(value: Any) -> str:
    """JSON as a person must see it to decide on it: every non-ASCII character escaped.

    What a model wrote (a tool call's arguments, a draft's definition) could hide something
    behind a right-to-left mark or a look-alike character; escaped, the text shown is exactly
    what the digest or hash covers (as the CLI shows it).
    """
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=True)


def said(error: InvalidInput) -> str:
    """An input error as a sentence for a page: its message, then where and what."""
    details = "; ".join(f"{p.path}: {p.message}" for p in error.problems)
    return error.message + (f" ({details})" if details else "")


def _when(value: Any) -> str:
    if not value:
        return "—"
    text = str(value).replace("T", " ").replace("Z", "")
    return text[:23] + " UTC"


def _duration(start: Any, end: Any) -> str:
    if not start or not end:
        return "—"
    began = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
    ended = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
    seconds = (ended - began).total_seconds()
    return f"{seconds:.3f} s" if seconds < 60 else f"{seconds / 60:.1f} min"


def _environment() -> jinja2.Environment:
    import jinja2  # noqa: PLC0415 - at the first page rendered: the service starts without it

    from workload_api.console._values import PAGE_BYTES, VALUE_BYTES  # noqa: PLC0415 - as jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("workload_api.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = _pretty
    env.filters["exact"] = exact_json
    env.filters["when"] = _when
    env.globals["duration"] = _duration
    env.globals["new_form_key"] = new_form_key
    env.globals["workflow_id_pattern"] = WORKFLOW_ID_INPUT_PATTERN
    env.globals["value_kib"] = VALUE_BYTES // 1024
    env.globals["page_kib"] = PAGE_BYTES // 1024
    return env


Handler = Callable[[View], Awaitable[Response]]


class Console:
    """The console's shared parts: use cases, sessions, templates and navigation."""

    def __init__(
        self,
        usecases: UseCases,
        sessions: Sessions,
        clock: Clock,
        nav: tuple[NavEntry, ...] = (),
        *,
        threaded: bool = True,
    ) -> None:
        self.usecases = usecases
        self.sessions = sessions
        self.clock = clock
        self.nav = nav
        self.threaded = threaded
        """Render on a worker thread (the default); False: on the loop (a benchmark compares)."""
        self._templates: jinja2.Environment | None = None

    async def render(
        self, request: Request, template: str, *, status: int = 200, **context: Any
    ) -> HTMLResponse:
        """Render a template to an HTML response, off the event loop.

        The first render loads the templates (on the loop, once).
        """
        from workload_api.console._values import Previews  # noqa: PLC0415 - with Jinja2

        if self._templates is None:
            self._templates = _environment()
        page = self._templates.get_template(template)
        values = {"nav": self.nav, "request": request, "values": Previews(), **context}
        if self.threaded:
            body = await anyio.to_thread.run_sync(page.render, values)
        else:
            body = page.render(values)
        return HTMLResponse(body, status_code=status)

    def page(
        self,
        path: str,
        handler: Handler,
        *,
        method: str = "GET",
        role: Role = Role.VIEWER,
    ) -> Route:
        """A route of the console behind the sign-in guard (and CSRF for POSTs)."""

        async def endpoint(request: Request) -> Response:
            request.state.route = path
            try:
                return await self._guarded(request, handler, method, role)
            except HttpProblem as problem:
                request.state.error_code = problem.code
                return await self.error(request, problem.status, problem.detail)
            except WorkloadError as error:
                mapped = problem_for(error)
                request.state.error_code = mapped.code
                return await self.error(request, mapped.status, mapped.detail)

        return Route(path, endpoint, methods=[method])

    async def _guarded(
        self, request: Request, handler: Handler, method: str, role: Role
    ) -> Response:
        session = await self.sessions.read(request.cookies.get(SESSION_COOKIE))
        form: dict[str, str] = {}
        if method == "POST":
            # Without a session no CSRF token can be valid: refused before the body is read,
            # so a slow or large body from anyone costs nothing (ADR 0024).
            if session is not None:
                form = await read_form(request)
            if session is None or not await self.sessions.check_csrf(session, form.get("csrf")):
                request.state.error_code = "csrf_failed"
                return await self.error(
                    request,
                    403,
                    "This form expired or did not come from this console: "
                    "reload the page, sign in if asked, and try again.",
                )
        elif session is None:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"/ui/login?{urlencode({'next': target})}", status_code=303)
        assert session is not None
        if not session.principal.role.allows(role):
            request.state.error_code = "forbidden"
            return await self.error(request, 403, "Your role may not do this (operators only).")
        _check_path(request)
        csrf = await self.sessions.csrf_token(session)
        return await handler(View(request, session, csrf, self, form))

    async def error(self, request: Request, status: int, detail: str) -> HTMLResponse:
        """An error page (no internals: the detail is the problem's)."""
        session = await self.sessions.read(request.cookies.get(SESSION_COOKIE))
        view = None
        if session is not None:
            view = View(request, session, await self.sessions.csrf_token(session), self)
        return await self.render(
            request, "error.html", status=status, view=view, status_code=status, detail=detail
        )


def _check_path(request: Request) -> None:
    """A path naming a workflow that cannot exist is not found (404), as in the API.

    The id never reaches the store: PostgreSQL cannot even compare a string holding NUL. Run,
    task, approval, draft ids and version numbers are checked by the use cases (404 too).
    """
    workflow_id = request.path_params.get("workflow_id")
    if workflow_id is not None and not _WORKFLOW_ID.fullmatch(workflow_id):
        raise WorkflowNotFound(workflow_id)


async def read_form(request: Request, limit: int = MAX_BODY_BYTES) -> dict[str, str]:
    """A urlencoded form (first value of each field); 413 over ``limit`` bytes (1 MiB).

    A body of another type (JSON, multipart, text), or one no browser sends for the console's
    forms (not UTF-8, over 50 fields), is no form of the console's: it has no fields, so no CSRF
    token, and the request is refused as one without it (403, SPEC §13) — never 415 or 400
    before the CSRF check.
    """
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != _FORM_TYPE:
        return {}
    body = await read_limited(request, limit)
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        return {}
    form: dict[str, str] = {}
    for name, value in pairs:
        form.setdefault(name, value)
    return form


def safe_next(value: str | None) -> str:
    """Where to go after signing in: a console path only (never another site)."""
    if value and _SAFE_NEXT.fullmatch(value) and "//" not in value and "/../" not in value:
        return value
    return "/ui/runs"


def query_link(path: str, params: Mapping[str, str | None]) -> str:
    """``path`` with the non-empty ``params`` as its query string."""
    kept = {k: v for k, v in params.items() if v}
    return f"{quote(path)}?{urlencode(kept)}" if kept else quote(path)

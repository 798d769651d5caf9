"""Sign-in with a pasted token, and sign-out (SPEC §13).

The token travels once, in the body of a POST (never in a URL), is checked like a bearer token
and forgotten: the browser gets a signed cookie naming a session row kept on the server (ADR
0022), and sign-out revokes that row. A worker token cannot sign in. The sign-in form is
CSRF-protected too (its token is bound to a nonce in a short-lived cookie), so another site
cannot sign a browser in as someone else.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from workload_api.auth import Role
from workload_api.console._sessions import LOGIN_COOKIE, LOGIN_MAX_AGE, SESSION_COOKIE
from workload_api.console._web import Console, View, read_form, safe_next
from workload_api.problems import HttpProblem

__all__ = ["SIGN_IN_BODY_BYTES", "routes"]

SIGN_IN_BODY_BYTES = 8 * 1024
"""The most a sign-in's body may hold (a token, the form's CSRF token, where to go next): 413
beyond it, before it is read when its ``Content-Length`` says so."""


def _cookie(
    response: Response, request: Request, console: Console, *, name: str, value: str, max_age: int
) -> None:
    # Expires too (SPEC §13: Max-Age/Expires), the same moment for a client that knows only it.
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        expires=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=console.sessions.secure(request.url.scheme),
    )


def routes(console: Console) -> list[Route]:
    """The sign-in form, its POST, and sign-out."""

    async def form_page(
        request: Request, *, status: int = 200, message: str | None = None
    ) -> Response:
        nonce = secrets.token_urlsafe(18)
        response = await console.render(
            request,
            "login.html",
            status=status,
            view=None,
            csrf=await console.sessions.login_token(nonce),
            next=safe_next(request.query_params.get("next")),
            message=message,
        )
        _cookie(response, request, console, name=LOGIN_COOKIE, value=nonce, max_age=LOGIN_MAX_AGE)
        return response

    async def login(request: Request) -> Response:
        request.state.route = "/ui/login"
        if request.method == "GET":
            return await form_page(request)
        nonce = request.cookies.get(LOGIN_COOKIE)
        if not console.sessions.may_sign_in(nonce):
            # No sign-in cookie: no form of ours, refused before its body is read (ADR 0024).
            request.state.error_code = "csrf_failed"
            return await form_page(
                request, status=403, message="The sign-in form expired; please try again."
            )
        try:
            # A token, its CSRF and where to go: anyone may send it (a form's cookie is there
            # for the asking), so it holds no more than this while it is read.
            form = await read_form(request, SIGN_IN_BODY_BYTES)
        except HttpProblem as problem:
            request.state.error_code = problem.code
            return await console.error(request, problem.status, problem.detail)
        if not await console.sessions.check_login(nonce, form.get("csrf")):
            request.state.error_code = "csrf_failed"
            return await form_page(
                request, status=403, message="The sign-in form expired; please try again."
            )
        principal = await console.sessions.authenticator.identify(form.get("token", ""))
        if principal is None:
            request.state.error_code = "unauthenticated"
            return await form_page(request, status=401, message="That token is not valid.")
        if not principal.role.allows(Role.VIEWER):
            request.state.error_code = "forbidden"
            return await form_page(
                request, status=403, message="Worker tokens cannot sign in to the console."
            )
        response = RedirectResponse(safe_next(form.get("next")), status_code=303)
        cookie = await console.sessions.issue(principal)
        _cookie(
            response,
            request,
            console,
            name=SESSION_COOKIE,
            value=cookie,
            max_age=console.sessions.max_age,
        )
        response.delete_cookie(LOGIN_COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def logout(view: View) -> Response:
        # The row is revoked: a copy of the cookie kept elsewhere signs nobody in (ADR 0022).
        await console.sessions.revoke(view.session.session_id)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(
            SESSION_COOKIE,
            path="/",
            httponly=True,
            samesite="strict",
            secure=console.sessions.secure(view.request.url.scheme),
        )
        return response

    async def root(request: Request) -> Response:
        request.state.route = request.url.path
        return RedirectResponse("/ui/runs", status_code=303)

    return [
        Route("/ui", root, methods=["GET"]),
        Route("/ui/", root, methods=["GET"]),
        Route("/ui/login", login, methods=["GET", "POST"]),
        console.page("/ui/logout", logout, method="POST"),
    ]

"""The base of the service's ASGI middlewares: they act on HTTP requests only.

Any other scope (the server's ``lifespan``) passes through to the wrapped application untouched.
"""

from __future__ import annotations

import abc

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["HttpMiddleware"]


class HttpMiddleware(abc.ABC):
    """ASGI middleware whose :meth:`http` sees every HTTP request; other scopes pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one connection scope."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    @abc.abstractmethod
    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request (``scope["type"]`` is ``"http"``)."""

"""Security headers: ``nosniff`` everywhere; a strict CSP and no caching on the console.

Every console response carries a Content-Security-Policy without inline script or style and
without framing (``frame-ancestors 'none'``).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import Message, Receive, Scope, Send

from workload_api._asgi import HttpMiddleware

__all__ = ["CONSOLE_PREFIX", "CONTENT_SECURITY_POLICY", "SecurityHeaders"]

CONSOLE_PREFIX = "/ui"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
_CONSOLE = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class SecurityHeaders(HttpMiddleware):
    """ASGI middleware adding the headers above to every HTTP response."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Handle one HTTP request."""
        path: str = scope.get("path", "")
        console = path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Content-Type-Options"] = "nosniff"
                if console:
                    for name, value in _CONSOLE.items():
                        headers[name] = value
                    if "cache-control" not in headers:
                        headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)

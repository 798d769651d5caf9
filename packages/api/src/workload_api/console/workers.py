"""Workers and queues (SPEC §10): who claims work, and what waits in each queue."""

from __future__ import annotations

from starlette.responses import Response
from starlette.routing import Route

from workload_api.console._web import Console, View, query_link

__all__ = ["routes"]

PAGE_SIZE = 50


async def workers_page(view: View) -> Response:
    usecases = view.console.usecases.workers
    cursor = view.request.query_params.get("cursor") or None
    page = await usecases.list_workers(cursor, PAGE_SIZE)
    queues = await usecases.list_queues()
    next_link = None
    if page["next_cursor"]:
        next_link = query_link("/ui/workers", {"cursor": str(page["next_cursor"])})
    return await view.render(
        "workers.html", workers=page["items"], queues=queues["items"], next_link=next_link
    )


def routes(console: Console) -> list[Route]:
    """The workers and queues page."""
    return [console.page("/ui/workers", workers_page)]

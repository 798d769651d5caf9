"""The auto-paging iterator over a cursor-paginated listing (for both clients; see ``pagination``).

Pages are fetched lazily, one request per page, following ``next_cursor`` until it is null.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from functools import partial
from typing import ParamSpec, TypeVar

from workload_sdk._base_client import AsyncFetch, AsyncPageMethod
from workload_sdk.models import Page

__all__ = ["AsyncPager", "paged"]

T = TypeVar("T")
P = ParamSpec("P")


class AsyncPager(AsyncIterator[T]):
    """Every item of a listing, fetched page by page as you iterate (one pass).

    Args:
        fetch: Returns the page at a cursor (None: the first page).

    Example:
        >>> async for run in client.runs.list(status="failed"):  # doctest: +SKIP
        ...     print(run.run_id)
    """

    def __init__(self, fetch: AsyncFetch[T]) -> None:
        self._fetch = fetch
        self._buffer: deque[T] = deque()
        self._cursor: str | None = None
        self._done = False

    def __aiter__(self) -> AsyncPager[T]:
        return self

    async def __anext__(self) -> T:
        while not self._buffer:
            if self._done:
                raise StopAsyncIteration
            page = await self._fetch(self._cursor)
            self._buffer.extend(page.items)
            self._cursor = page.next_cursor
            self._done = page.next_cursor is None
        return self._buffer.popleft()

    async def pages(self) -> AsyncIterator[Page[T]]:
        """A new pass over the listing from its start, one :class:`Page` at a time."""
        cursor: str | None = None
        while True:
            page = await self._fetch(cursor)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def to_list(self) -> list[T]:
        """Every remaining item, in order (fetches every remaining page)."""
        return [item async for item in self]


def paged(page: AsyncPageMethod[P, T], *args: P.args, **kwargs: P.kwargs) -> AsyncPager[T]:
    """A pager over a resource's ``*_page`` method: each page is that method's answer at a cursor.

    A listing (``runs.list`` …) is its page method called cursor after cursor with the listing's
    own arguments; ``cursor`` is left out of them (the pager passes it).
    """
    fetch: AsyncPageMethod[..., T] = partial(page, *args, **kwargs)
    return AsyncPager(lambda cursor: fetch(cursor=cursor))

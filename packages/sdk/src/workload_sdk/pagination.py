"""Auto-paging iterators over the API's cursor-paginated listings.

A listing method (``client.runs.list()``, ``client.runs.events(run_id)`` …) returns a
:class:`Pager` (or an :class:`AsyncPager`): iterate it for every item, in the API's order; pages
are fetched lazily, one request per page, following ``next_cursor`` until it is null. For one
page at a time with its cursor, use the resource's ``*_page`` method, or :meth:`Pager.pages`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Generic, TypeVar

from workload_sdk.models import Page

__all__ = ["AsyncPager", "Pager"]

T = TypeVar("T")


class Pager(Iterator[T]):
    """Every item of a listing, fetched page by page as you iterate (one pass).

    Args:
        fetch: Returns the page at a cursor (None: the first page).

    Example:
        >>> for run in client.runs.list(status="failed"):  # doctest: +SKIP
        ...     print(run.run_id)
    """

    def __init__(self, fetch: Callable[[str | None], Page[T]]) -> None:
        self._fetch = fetch
        self._buffer: deque[T] = deque()
        self._cursor: str | None = None
        self._done = False

    def __iter__(self) -> Pager[T]:
        return self

    def __next__(self) -> T:
        while not self._buffer:
            if self._done:
                raise StopIteration
            page = self._fetch(self._cursor)
            self._buffer.extend(page.items)
            self._cursor = page.next_cursor
            self._done = page.next_cursor is None
        return self._buffer.popleft()

    def pages(self) -> Iterator[Page[T]]:
        """A new pass over the listing from its start, one :class:`Page` at a time."""
        cursor: str | None = None
        while True:
            page = self._fetch(cursor)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor


class AsyncPager(Generic[T]):
    """Every item of a listing, fetched page by page as you ``async for`` (one pass).

    Args:
        fetch: Returns the page at a cursor (None: the first page).

    Example:
        >>> async for run in client.runs.list(status="failed"):  # doctest: +SKIP
        ...     print(run.run_id)
    """

    def __init__(self, fetch: Callable[[str | None], Awaitable[Page[T]]]) -> None:
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

"""The auto-paging iterator over a cursor-paginated listing (for both clients; see ``pagination``).

Pages are fetched lazily, one request per page, following ``next_cursor`` until it is null.
:class:`AsyncListing` is the ``list`` and ``list_page`` of every resource whose listing takes
no argument but the page's (workflows, drafts, workers).
"""

# ruff: noqa: ASYNC109 - ``timeout=`` is each call's HTTP timeout, in both clients (SPEC §8).
from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from functools import partial
from typing import Generic, ParamSpec, TypeVar

from workload_sdk._async_sender import AsyncSender
from workload_sdk._base_client import AsyncFetch, AsyncPageMethod, ExtraHeaders, RequestTimeout
from workload_sdk._requests import ApiRequest
from workload_sdk.errors import APIResponseValidationError
from workload_sdk.models import Page

__all__ = ["AsyncListing", "AsyncPager", "paged"]

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
        self._followed: set[str] = set()

    def __aiter__(self) -> AsyncPager[T]:
        return self

    async def __anext__(self) -> T:
        while not self._buffer:
            if self._done:
                raise StopAsyncIteration
            page = await self._fetch(self._cursor)
            self._buffer.extend(page.items)
            self._cursor = _next_cursor(page, self._followed)
            self._done = page.next_cursor is None
        return self._buffer.popleft()

    async def pages(self) -> AsyncIterator[Page[T]]:
        """A new pass over the listing from its start, one :class:`Page` at a time."""
        cursor: str | None = None
        followed: set[str] = set()
        while True:
            page = await self._fetch(cursor)
            yield page
            if page.next_cursor is None:
                return
            cursor = _next_cursor(page, followed)

    async def to_list(self) -> list[T]:
        """Every remaining item, in order (fetches every remaining page)."""
        return [item async for item in self]


def _next_cursor(page: Page[T], followed: set[str]) -> str | None:
    """The cursor of the page after ``page``, followed once in a pass.

    A server that hands one out again (a cycle) would be asked for the same pages for ever.

    Raises:
        APIResponseValidationError: ``next_cursor`` is one this pass has followed already.
    """
    cursor = page.next_cursor
    if cursor is not None:
        if cursor in followed:
            raise APIResponseValidationError(
                "the listing's next_cursor repeats one already followed: the pages would never end"
            )
        followed.add(cursor)
    return cursor


def paged(page: AsyncPageMethod[P, T], *args: P.args, **kwargs: P.kwargs) -> AsyncPager[T]:
    """A pager over a resource's ``*_page`` method: each page is that method's answer at a cursor.

    A listing (``runs.list`` …) is its page method called cursor after cursor with the listing's
    own arguments; ``cursor`` is left out of them (the pager passes it).
    """
    fetch: AsyncPageMethod[..., T] = partial(page, *args, **kwargs)
    return AsyncPager(lambda cursor: fetch(cursor=cursor))


class AsyncListing(Generic[T]):
    """A resource with a plain listing: ``list`` and ``list_page`` of one ``GET``, in its order.

    A resource names the request of a page (:meth:`_page_request`); its class says what is
    listed, and in which order.
    """

    def __init__(self, sender: AsyncSender) -> None:
        self._sender = sender

    def _page_request(self, limit: int | None, cursor: str | None) -> ApiRequest[Page[T]]:
        raise NotImplementedError

    def list(
        self,
        *,
        limit: int | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> AsyncPager[T]:
        """Every item, in the listing's order, fetched page by page as you iterate.

        Args:
            limit: Page size (1-200; the server's default is 50).
            timeout: The HTTP timeout of each page's request (None: the client's).
            extra_headers: Headers added to each page's request.
        """
        return paged(self.list_page, limit=limit, timeout=timeout, extra_headers=extra_headers)

    async def list_page(
        self,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        timeout: RequestTimeout = None,
        extra_headers: ExtraHeaders = None,
    ) -> Page[T]:
        """One page of the listing: the one at ``cursor``, a previous page's ``next_cursor``.

        ``limit`` is as in :meth:`list`; ``timeout`` and ``extra_headers`` are this call's, and
        the first page is at ``cursor=None``.

        Raises:
            InvalidRequest: ``invalid_cursor`` or ``invalid_argument`` (a bad limit).
        """
        request = self._page_request(limit, cursor)
        return await self._sender.send(request, timeout, extra_headers)

"""Auto-paging iterators over the API's cursor-paginated listings.

A listing method (``client.runs.list()``, ``client.runs.events(run_id)`` …) returns a
:class:`Pager` (or an :class:`AsyncPager`): iterate it for every item, in the API's order; pages
are fetched lazily, one request per page, following ``next_cursor`` until it is null. For one
page at a time with its cursor, use the resource's ``*_page`` method, or :meth:`Pager.pages`;
for every remaining item at once, :meth:`Pager.to_list`. ``Pager`` is derived from
``AsyncPager`` at build time (ADR 0035).
"""

from workload_sdk._async_pagination import AsyncPager
from workload_sdk._pagination import Pager

__all__ = ["AsyncPager", "Pager"]

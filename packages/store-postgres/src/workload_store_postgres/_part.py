"""What every part of the store shares: the database, the cursor codec, reads, run checks."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from workload_domain.cursors import CursorCodec, Page, Scope
from workload_domain.errors import RunNotFound, TaskNotFound
from workload_domain.listings import Fetch, Listing, paginate
from workload_store_postgres._db import Conn, Database, Row, one, rows

__all__ = ["StorePart"]

T = TypeVar("T")


class StorePart:
    """Base of the store's parts (workflows, runs, reads, idempotency); not used alone."""

    _db: Database
    _codec: CursorCodec | None

    @property
    def codec(self) -> CursorCodec:
        """The cursor codec, keyed from the database when the store opened."""
        if self._codec is None:
            raise RuntimeError("the store is not open")
        return self._codec

    async def _paginate(
        self, listing: Listing[T], scope: Scope, cursor: str | None, limit: int, fetch: Fetch[T]
    ) -> Page[T]:
        return await paginate(
            self.codec, listing, scope=scope, cursor=cursor, limit=limit, fetch=fetch
        )

    async def _read(
        self,
        name: str,
        params: Mapping[str, Any],
        convert: Callable[[Row], T],
        *,
        run: tuple[uuid.UUID, str] | None = None,
    ) -> list[T]:
        """Rows of a named query; with ``run``, an empty result from a missing run is 404."""
        async with self._db.single() as conn:
            found = await rows(conn, name, params)
            if not found and run is not None:
                await require_run(conn, *run)
        return [convert(r) for r in found]


async def require_task(conn: Conn, run_id: uuid.UUID, spelled: str, task_key: str) -> Row:
    """The task's row; ``RunNotFound`` or ``TaskNotFound`` when there is none."""
    row = await one(conn, "get_task", {"run_id": run_id, "task_key": task_key})
    if row is None:
        await require_run(conn, run_id, spelled)
        raise TaskNotFound(spelled, task_key)
    return row


async def require_run(conn: Conn, run_id: uuid.UUID, spelled: str) -> None:
    """Raise ``RunNotFound`` unless the run exists."""
    if await one(conn, "run_exists", {"run_id": run_id}) is None:
        raise RunNotFound(spelled)

"""Database spans: a cursor that reports each statement to the telemetry port (SPEC §12).

The pool's connections use :func:`traced_cursor`'s class only while spans are recorded, so a
service without tracing executes statements through psycopg's own cursor, at no cost. A span is
named after the statement's named query (``create_run``, ``claim_attempts``); its text carries
placeholders only, never values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import psycopg
from psycopg import sql as psql
from psycopg.abc import Params, Query

from workload_domain.telemetry import Telemetry
from workload_store_postgres._queries import statement_name

__all__ = ["traced_cursor"]

Row = dict[str, Any]


def _text(query: Query) -> str:
    if isinstance(query, str):
        return query
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    if isinstance(query, psql.Composable):
        return repr(query)
    return str(query)


def traced_cursor(telemetry: Telemetry) -> type[psycopg.AsyncCursor[Row]]:
    """A cursor class whose statements are spans of ``telemetry``."""

    class TracedCursor(psycopg.AsyncCursor[Row]):
        async def execute(
            self,
            query: Query,
            params: Params | None = None,
            *,
            prepare: bool | None = None,
            binary: bool | None = None,
        ) -> TracedCursor:
            # psycopg overloads execute on the query's kind; this passes it on unchanged.
            if not telemetry.traces_statements():  # asked first: naming a statement costs more
                await super().execute(cast(Any, query), params, prepare=prepare, binary=binary)
                return self
            text = _text(query)
            with telemetry.statement(statement_name(text), text):
                await super().execute(cast(Any, query), params, prepare=prepare, binary=binary)
            return self

        async def executemany(
            self,
            query: Query,
            params_seq: Iterable[Params],
            *,
            returning: bool = False,
        ) -> None:
            if not telemetry.traces_statements():
                await super().executemany(query, params_seq, returning=returning)
                return
            text = _text(query)
            with telemetry.statement(statement_name(text), text):
                await super().executemany(query, params_seq, returning=returning)

    return TracedCursor

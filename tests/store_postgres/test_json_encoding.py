"""ADR 0038 on real PostgreSQL: JSON parameters encoded by orjson store what the stdlib stored.

The store's JSONB parameters (run inputs, event data, the JSON row arrays of a commit) are
encoded by ``workload_store_postgres._json.dumps``: orjson, else the stdlib where orjson refuses.
PostgreSQL parses either text into the same JSONB; these tests compare the stored values, not
the bytes, for generated and awkward values, and check that what PostgreSQL refused before
(a lone surrogate, ``\\u0000``) it refuses still.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from hypothesis import given, settings
from psycopg.adapt import PyFormat
from psycopg.types.json import Jsonb

from tests.json_values import AWKWARD_FLOATS, AWKWARD_INTS, json_objects
from workload_store_postgres._json import dumps
from workload_store_postgres._json import stdlib_dumps as _stdlib
from workload_store_postgres.store import PostgresStore


def _stored(conn: psycopg.Connection[Any], value: Any, encode: Any) -> Any:
    """``value`` encoded by ``encode``, parsed by PostgreSQL into JSONB, read back as text."""
    row = conn.execute("SELECT (%s::jsonb)::text", (Jsonb(value, dumps=encode),)).fetchone()
    assert row is not None
    return row[0]


AWKWARD: list[Any] = [
    {"floats": list(AWKWARD_FLOATS), "ints": list(AWKWARD_INTS)},
    {"small": 1e-7, "big": 1e20, "neg_zero": -0.0, "tiny": 5e-324, "max": 1.7976931348623157e308},
    {"text": 'é ü 中文 😀 \u2028\u2029 \x7f \x01 "quoted" back\\slash', "": ""},
    {"nested": [[[[{"a": [1, 2, {"b": None}]}]]]], "bools": [True, False]},
    {"big_int_alone": 2**64 + 1},  # beyond 64 bits: the stdlib encodes it
    [],
    {},
    "",
    0,
]


@pytest.mark.parametrize("value", AWKWARD, ids=range(len(AWKWARD)))
def test_awkward_values_store_as_the_stdlib_stored_them(database_url: str, value: Any) -> None:
    with psycopg.connect(database_url) as conn:
        assert _stored(conn, value, dumps) == _stored(conn, value, _stdlib)


def test_generated_values_store_as_the_stdlib_stored_them(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:

        @settings(max_examples=300, deadline=None, derandomize=True)
        @given(value=json_objects)
        def check(value: dict[str, Any]) -> None:
            assert _stored(conn, value, dumps) == _stored(conn, value, _stdlib)

        check()


def test_row_values_store_as_the_stdlib_stored_them(database_url: str) -> None:
    """Datetimes (aware, naive, microseconds or none), ids and nested JSONB in a row array."""
    at = datetime(2026, 12, 2, 11, 0, 0, 5, tzinfo=UTC)
    rows = [
        {
            "run_id": uuid.UUID("018f3b6e-0000-7000-8000-000000000001"),
            "created_at": at,
            "ended_at": at.replace(microsecond=0),
            "local": at.astimezone(timezone(timedelta(hours=5, minutes=30))),
            "naive": at.replace(tzinfo=None),
            "error": Jsonb({"kind": "timeout", "message": "late"}),
            "output": None,
        }
    ]
    with psycopg.connect(database_url) as conn:
        assert _stored(conn, rows, dumps) == _stored(conn, rows, _stdlib)
        typed = conn.execute(
            "SELECT created_at, ended_at, local, naive FROM jsonb_to_recordset(%s::jsonb) AS r("
            "created_at timestamptz, ended_at timestamptz, local timestamptz, naive timestamp)",
            (Jsonb(rows, dumps=dumps),),
        ).fetchone()
    assert typed == (at, at.replace(microsecond=0), at, at.replace(tzinfo=None))


def test_an_integer_beyond_64_bits_keeps_every_digit(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        for number in (2**64, -(2**70), 10**40 + 1):
            assert _stored(conn, {"n": number}, dumps) == f'{{"n": {number}}}'


@pytest.mark.parametrize(
    "value",
    [{"s": "\ud800"}, {"s": "a\udfffb"}, {"s": "nul \u0000 inside"}, {"k\u0000": 1}],
    ids=["lone-high", "lone-low", "nul-in-value", "nul-in-key"],
)
def test_what_postgresql_refused_it_still_refuses(database_url: str, value: Any) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.DataError) as before:
            _stored(conn, value, _stdlib)
        with pytest.raises(psycopg.DataError) as now:
            _stored(conn, value, dumps)
    assert type(now.value) is type(before.value)


def test_what_the_stdlib_could_not_encode_it_cannot_either() -> None:
    @dataclass
    class Record:
        a: int

    for value in ({"r": Record(1)}, {"s": {1, 2}}, {"b": b"bytes"}, {1: "int key"}):
        stdlib_error = None
        try:
            _stdlib(value)
        except TypeError as exc:
            stdlib_error = exc
        if stdlib_error is None:  # the stdlib encodes an int key as a string: so does this
            assert json.loads(dumps(value)) == json.loads(_stdlib(value))
            continue
        with pytest.raises(TypeError):
            dumps(value)


@pytest.mark.anyio
async def test_the_stores_connections_encode_json_with_it(database_url: str) -> None:
    async with (
        PostgresStore(database_url, max_size=1) as store,
        store._db.pool.connection() as conn,  # its configured pool
    ):
        for format_ in (PyFormat.BINARY, PyFormat.TEXT):
            dumper = conn.adapters.get_dumper(Jsonb, format_)
            assert getattr(dumper, "_dumps", None) is dumps

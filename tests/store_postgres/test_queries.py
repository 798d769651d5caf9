"""The named queries' loader: parts written once, pasted whole into the queries that use them."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources

import pytest
from psycopg import _queries as psycopg_queries
from psycopg.adapt import Transformer

from workload_store_postgres._queries import parse, query, statement_name

_TEXT = """-- preamble, not a query

-- part: columns
-- What the part is (not pasted).
SELECT a, b
FROM t

-- name: first
-- Served by t_pkey.
-- with part: columns
WHERE a = %(a)s

-- name: second
-- with part: columns
WHERE b = %(b)s
ORDER BY a
"""


def test_a_part_is_pasted_where_it_is_used_and_no_comment_is_sent() -> None:
    assert parse(_TEXT) == {
        "first": "SELECT a, b\nFROM t\nWHERE a = %(a)s",
        "second": "SELECT a, b\nFROM t\nWHERE b = %(b)s\nORDER BY a",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- name: q\n-- with part: missing\nWHERE x\n", "the part 'missing' is used before"),
        ("-- name: q\n-- with part: p\n-- part: p\nSELECT 1\n", "the part 'p' is used before"),
        ("-- part: p\nSELECT 1\n-- part: p\nSELECT 2\n", "the part name 'p' is defined twice"),
        ("-- name: q\nSELECT 1\n-- name: q\nSELECT 2\n", "the query name 'q' is defined twice"),
        ("-- name: q\nSELECT '\u2014'\n", "the query 'q' has SQL that is not ASCII"),
        ("-- part: p\nSELECT '\u00a7'\n", "the part 'p' has SQL that is not ASCII"),
    ],
    ids=[
        "unknown",
        "used-before-defined",
        "part-twice",
        "query-twice",
        "query-not-ascii",
        "part-not-ascii",
    ],
)
def test_a_malformed_file_is_refused_with_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        parse(text)


def test_a_part_is_no_query_and_no_statement_keeps_a_use_line() -> None:
    with pytest.raises(KeyError):
        query("run_with_counts")
    for name in ("get_run_with_counts", "page_runs", "page_runs_by_workflow_and_status_desc"):
        text = query(name)
        assert "-- with part:" not in text
        assert "AS task_counts\nFROM workflow_runs r\nWHERE " in text
        assert statement_name(text) == name


def test_a_use_line_must_stand_alone_to_paste() -> None:
    # Text around the marker on its line is not a use: the line is a comment (not sent).
    assert parse("-- part: p\nSELECT 1\n-- name: q\n-- with part: p and more\nSELECT 2\n") == {
        "q": "SELECT 2"
    }


def test_every_statement_sent_is_ascii_sql_without_comment_lines() -> None:
    # The file's comments (with dashes and section signs) stay in the file.
    assert "\u2014" in resources.files("workload_store_postgres").joinpath("queries.sql").read_text(
        encoding="utf-8"
    )
    for name in ("create_run", "commit_run", "claim_attempts", "find_attempt", "page_runs"):
        text = query(name)
        assert text.isascii(), name
        assert not any(line.lstrip().startswith("--") for line in text.splitlines()), name
        assert text.split(None, 1)[0].upper() in {"SELECT", "WITH", "INSERT", "UPDATE"}, name
        assert statement_name(text) == name


def test_psycopg_keeps_its_conversion_of_even_the_longest_statement() -> None:
    # claim_attempts is longer than the 4,096 bytes under which psycopg keeps a statement's
    # conversion of placeholders; reading the files raises that limit. Should a psycopg release
    # drop the constant, this fails: look again at how it caches a statement then.
    claim = query("claim_attempts").encode()
    assert len(claim) > 4096
    assert len(claim) <= psycopg_queries.MAX_CACHED_STATEMENT_LENGTH
    params = {
        "worker_id": "w",
        "queues": ["default"],
        "actions": ["a"],
        "limit": 1,
        "digests": ["d"],
        "now": datetime.now(UTC),
        "seen_seconds": 5.0,
        "record_seen": True,
    }
    before = psycopg_queries._query2pg.cache_info()
    for _ in range(3):
        psycopg_queries.PostgresQuery(Transformer()).convert(claim, params)
    after = psycopg_queries._query2pg.cache_info()
    assert after.hits - before.hits >= 2  # converted once at most, then found

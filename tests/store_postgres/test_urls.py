"""A database URL libpq cannot parse is refused without repeating it (it may hold a password)."""

from __future__ import annotations

import pytest

from workload_store_postgres.urls import check_database_url

SECRET = "Pw0rd"


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("notaurl", 'missing "=" after "…"'),
        (f"postgresql://user:{SECRET}@[::1/db", 'matching "]" in IPv6 host address in URI: "…"'),
        (f"host=x password={SECRET} port", 'missing "=" after "…"'),
        (f'host=x password=a"{SECRET} port', 'missing "=" after "…"'),
        (f'postgresql://u:{SECRET}@h/db?sslmode=x&a="{SECRET}', 'invalid URI query parameter: "…"'),
        (f"password=!{SECRET}! x", 'missing "=" after "…"'),
        (f'postgresql://u:%"{SECRET}@h/db', 'invalid percent-encoded token: "…"'),
        (f'postgresql://u:!"{SECRET}%zz@h/db', 'invalid percent-encoded token: "…"'),
        (f'host=h password=foo !"{SECRET}=x', 'invalid connection option "…"'),
        (f'host=h !"{SECRET}', 'missing "=" after "…"'),
    ],
    ids=[
        "word",
        "ipv6",
        "pairs",
        "quote-in-password",
        "query",
        "punctuation",
        "percent-quote",
        "punctuation-quote",
        "option-quote",
        "pair-quote",
    ],
)
def test_an_unparseable_url_is_refused_without_its_text(url: str, reason: str) -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL connection URL") as refused:
        check_database_url(url)
    message = str(refused.value)
    assert reason in message
    assert SECRET not in message
    assert "notaurl" not in message
    assert "postgresql://" not in message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p@h:5432/db?sslmode=require",
        "postgresql://postgres@/db?host=/tmp/x",
        "host=h",
    ],
)
def test_a_parseable_url_is_returned_as_it_is(url: str) -> None:
    assert check_database_url(url) == url

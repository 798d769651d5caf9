"""How GET /api/v1/runs reads an RFC 3339 bound (``parse_instant``): to the microsecond the
stores keep, rounding so that an exclusive bound selects exactly the runs it names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from workload_api.runs_listing import parse_instant

AT = datetime(2026, 12, 1, 9, 30, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "round_up", "expected"),
    [
        ("2026-12-01T09:30:00.123456Z", False, AT),
        ("2026-12-01T09:30:00.123456Z", True, AT),
        ("2026-12-01T09:30:00.123456000Z", True, AT),  # nothing past the microsecond
        ("2026-12-01T09:30:00.123456001Z", False, AT),  # after: dropped
        ("2026-12-01T09:30:00.123456001Z", True, AT.replace(microsecond=123457)),  # before: up
        ("2026-12-01T10:30:00.123456+01:00", False, AT),
        ("2026-12-01T08:00:00.123456-01:30", False, AT),
        ("2026-12-01T10:30:00.123456 01:00", False, AT),  # "+" decoded as a space
        ("2026-12-01t09:30:00.123456z", False, AT),
        ("2026-12-01T09:30:00.1Z", False, AT.replace(microsecond=100000)),
        ("9999-12-31T23:59:59.9999999Z", True, datetime.max.replace(tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", False, datetime.min.replace(tzinfo=UTC)),
        # RFC 3339 allows any number of fraction digits (1*DIGIT): 35 characters at the most.
        ("2026-12-01T09:30:00.1234560000001Z", False, AT),
        ("2026-12-01T09:30:00.1234560000001Z", True, AT.replace(microsecond=123457)),
        ("2026-12-01T09:30:00.1234560000000Z", True, AT),
        ("2026-12-01T10:30:00.1234561+01:00", False, AT),
        # A leap second: the instant after the minute's last second.
        ("2016-12-31T23:59:60Z", False, datetime(2017, 1, 1, tzinfo=UTC)),
        ("2016-12-31T23:59:60.5Z", False, datetime(2017, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
        ("2017-01-01T00:59:60+01:00", False, datetime(2017, 1, 1, tzinfo=UTC)),
    ],
)
def test_times_are_read_to_the_microsecond(text: str, round_up: bool, expected: datetime) -> None:
    found = parse_instant(text, round_up=round_up)
    assert found == expected
    assert found is not None
    assert found.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-01T09:30:00",
        "2026-12-01T09:30:00+1:00",
        "0000-12-01T09:30:00Z",
        "2026-12-01T09:30:00-00:60",
        "0001-01-01T00:30:00+01:00",
        "9999-12-31T23:30:00-00:31",
        "2026-12-01T09:30:00Z ",
        "2026-12-01T09:30:00.12345678901234567Z",  # 37 characters: past the parameter's 35
        "2026-12-01T09:30:00." + "1" * 5000 + "Z",
        "9999-12-31T23:59:60Z",  # past the last instant
        "2026-12-01T09:30:61Z",
    ],
)
def test_times_that_name_no_instant_are_none(text: str) -> None:
    assert parse_instant(text) is None
    assert parse_instant(text, round_up=True) is None

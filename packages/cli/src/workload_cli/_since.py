"""``--since``: where a window of runs starts, as the runs listing's ``created_after``.

A duration back from now (``30m``, ``1h``, ``2d``) or an RFC 3339 time (SPEC §8).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from workload_cli._session import UsageError

__all__ = ["since"]

_DURATION = re.compile(r"([0-9]{1,6})([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_HELP = "a duration back from now (30s, 30m, 1h, 2d, 1w) or an RFC 3339 time with an offset"


def since(value: str, now: datetime | None = None) -> datetime:
    """The instant ``value`` names: ``now`` minus a duration, or an aware RFC 3339 time.

    Raises:
        UsageError: neither a duration nor a time with an offset (exit 2).
    """
    duration = _DURATION.fullmatch(value)
    if duration is not None:
        amount, unit = int(duration.group(1)), _UNITS[duration.group(2)]
        try:
            return (now or datetime.now(UTC)) - timedelta(**{unit: amount})
        except OverflowError:  # before year 1
            raise UsageError(f"--since {value} reaches back before year 1") from None
    try:
        # A time carries a "T" (or a space) between date and clock: a bare date is refused
        # rather than read as midnight in some zone. RFC 3339 allows "t" and "z" too.
        text = value.upper()
        instant = datetime.fromisoformat(text) if len(value) > 10 and value.isascii() else None
    except ValueError:
        instant = None
    if instant is None or instant.utcoffset() is None:
        raise UsageError(f"--since must be {_HELP}, not {value[:40]!r}")
    return instant

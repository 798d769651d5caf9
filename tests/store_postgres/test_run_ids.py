"""Run and attempt ids as UUIDs: one spelling per id, converted once while it is in use.

``maybe_uuid`` accepts only the canonical spelling of a UUID (one id, one spelling) and keeps
the conversions of the ids in use; anything else, of any type and length, names no run and is
not kept.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from workload_domain.errors import RunNotFound
from workload_store_postgres._rows import _canonical_uuid, maybe_uuid, run_uuid

ID = "0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"


def test_the_canonical_spelling_is_its_uuid_and_is_kept() -> None:
    _canonical_uuid.cache_clear()
    first = maybe_uuid(ID)
    assert first == uuid.UUID(ID)
    assert maybe_uuid(ID) is first  # kept: the second conversion is a lookup
    assert run_uuid(ID) is first
    info = _canonical_uuid.cache_info()
    assert (info.hits, info.misses, info.maxsize) == (2, 1, 4096)


@pytest.mark.parametrize(
    "spelling",
    [
        ID.upper(),
        ID.replace("-", ""),
        "{" + ID + "}",
        "urn:uuid:" + ID,
        ID[:-1] + "g",
        ID + " ",
        " " + ID[1:],
        ID.replace("-", "_"),
        "",
        "x" * 36,
        "\u0000" * 36,
        "é" * 36,
    ],
)
def test_any_other_string_names_no_run(spelling: str) -> None:
    assert maybe_uuid(spelling) is None
    with pytest.raises(RunNotFound):
        run_uuid(spelling)


@pytest.mark.parametrize(
    "value", [None, 5, b"0193a2b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", ["x"], {"a": 1}]
)
def test_a_value_that_is_not_a_string_names_no_run(value: Any) -> None:
    assert maybe_uuid(value) is None


def test_what_is_kept_is_bounded_by_the_canonical_length() -> None:
    _canonical_uuid.cache_clear()
    for n in range(100):
        assert maybe_uuid(ID * (n + 2)) is None
        assert maybe_uuid("f" * (n + 37)) is None
    assert _canonical_uuid.cache_info().currsize == 0

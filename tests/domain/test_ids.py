"""ids.uuid7: UUID version 7 (RFC 9562) from a caller-supplied time and randomness."""

from __future__ import annotations

import re
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workload_domain.ids import uuid7

MAX_MS = 2**48 - 1
ms_values = st.integers(min_value=0, max_value=MAX_MS)
random_values = st.binary(min_size=10, max_size=10)


def test_all_zero() -> None:
    assert uuid7(0, bytes(10)) == "00000000-0000-7000-8000-000000000000"


def test_all_ones() -> None:
    assert uuid7(MAX_MS, b"\xff" * 10) == "ffffffff-ffff-7fff-bfff-ffffffffffff"


def test_known_value() -> None:
    # RFC 9562 appendix A.6 timestamp: 2022-02-22 19:22:22 UTC = 0x017F22E279B0 ms.
    value = uuid7(0x017F22E279B0, bytes.fromhex("0cc3" + "18c4dc0c0c07398f"))
    assert value.startswith("017f22e2-79b0-7")
    assert value == "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"


@settings(max_examples=50, deadline=None, derandomize=True)
@given(ms=ms_values, rand=random_values)
def test_version_variant_and_timestamp(ms: int, rand: bytes) -> None:
    text = uuid7(ms, rand)
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", text
    )
    parsed = uuid.UUID(text)
    assert parsed.version == 7
    assert parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == ms
    assert str(parsed) == text


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    ms=st.integers(0, MAX_MS - 1), step=st.integers(1, 10**6), r1=random_values, r2=random_values
)
def test_time_ordered_for_increasing_milliseconds(ms: int, step: int, r1: bytes, r2: bytes) -> None:
    later = min(ms + step, MAX_MS)
    assert uuid7(ms, r1) < uuid7(later, r2)


def test_time_ordered_even_against_extreme_randomness() -> None:
    ids = [uuid7(ms, b"\xff" * 10 if ms % 2 else bytes(10)) for ms in range(1000, 1100)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_randomness_changes_the_id() -> None:
    assert uuid7(5, bytes(9) + b"\x01") != uuid7(5, bytes(10))
    assert uuid7(5, b"\x01" + bytes(9)) != uuid7(5, bytes(10))


def test_deterministic() -> None:
    rand = bytes(range(10))
    assert uuid7(123456789, rand) == uuid7(123456789, rand)


@pytest.mark.parametrize("ms", [-1, MAX_MS + 1, 2**64])
def test_out_of_range_time(ms: int) -> None:
    with pytest.raises(ValueError, match="48-bit"):
        uuid7(ms, bytes(10))


@pytest.mark.parametrize("rand", [b"", bytes(9), bytes(11), bytes(16)])
def test_wrong_number_of_random_bytes(rand: bytes) -> None:
    with pytest.raises(ValueError, match="10 random bytes"):
        uuid7(0, rand)

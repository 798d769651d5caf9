"""Hypothesis strategies for JSON values, biased toward numbers JSONB gives back differently."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

AWKWARD_FLOATS = (
    1e16,
    -1e16,
    1e20,
    1.2345678901234568e20,
    1e22,
    1e300,
    1.7976931348623157e308,
    -0.0,
    0.0,
    5.0,
    9007199254740993.0,
    9999999999999998.0,
    1e-7,
    1.5e-10,
    5e-324,
    2.2250738585072014e-308,
    0.30000000000000004,
    1e15,
    1e-5,
)
"""Floats whose JSONB round trip is worth checking: exponents both ways, extremes, -0.0."""

AWKWARD_INTS = (2**53 + 1, 2**63, 2**64 + 1, -(2**70), 10**40, -(10**100))
"""Integers beyond 64 bits (numeric holds them exactly)."""

numbers: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(AWKWARD_FLOATS),
    st.sampled_from(AWKWARD_INTS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(10**30), max_value=10**30),
)
"""Finite JSON numbers."""

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=4)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | numbers | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=16,
)
"""Storable JSON values (no NUL, no lone surrogates, shallow)."""

json_objects: st.SearchStrategy[dict[str, Any]] = st.dictionaries(_text, json_values, max_size=4)
"""Storable JSON objects (a task's or a run's input)."""

"""The instruction-count benchmark's arithmetic: a dump's total, and the costs it reports."""

from __future__ import annotations

import pytest
from benchmarks.instructions_bench import costs, totals


def test_a_dump_total_is_read_from_its_totals_line_only() -> None:
    dump = "version: 1\ncreator: callgrind\nevents: Ir\nsummary: 99\nfn=main\n3 7\ntotals: 12345\n"
    assert totals(dump) == 12345
    assert totals("version: 1\nevents: Ir\nfn=main\n") is None  # still being written


def test_costs_are_against_off_and_ten_percent_is_the_expected_mix() -> None:
    found = costs({"off": 4.0, "metrics": 4.1, "traces_unsampled": 4.2, "traces_every": 6.0})
    assert found["metrics"] == pytest.approx(2.5)
    assert found["traces_unsampled"] == pytest.approx(5.0)
    # 0.9 * 4.2 + 0.1 * 6.0 = 4.38: 9.5 % above 4.0.
    assert found["traces_at_10_percent_expected"] == pytest.approx(9.5)
    assert found["traces_every"] == pytest.approx(50.0)

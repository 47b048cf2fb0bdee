"""How a table and a number are written: one helper for REPORT, reports/ and the CLI."""

from __future__ import annotations

import math

from depthprune.common.text_tables import fixed, markdown_table, significant


def test_cells_stay_as_written_unless_numbers_are_asked_for():
    rows = [["a", "1.50"], ["b", "10"]]
    plain = markdown_table(rows, ["k", "v"])
    assert plain.splitlines()[0].startswith("| k") and "1.50" in plain  # the caller's formatting kept
    assert "|  1.5 |" in markdown_table(rows, ["k", "v"], numparse=True)  # tabulate's: aligned, 1.5
    assert markdown_table([{"k": "x", "v": 2}], "keys").splitlines()[0].replace(" ", "") == "|k|v|"


def test_fixed_and_significant_write_missing_values_as_a_dash():
    assert [fixed(x) for x in (None, math.nan, math.inf, 0.12345, 7, "s")] == ["–", "–", "–", "0.123", "7", "s"]
    assert fixed(0.5, 1) == "0.5"
    assert [significant(x) for x in (None, math.nan, math.inf, 0.012345, 12345.0, [1, 2])] == \
        ["–", "–", "∞", "0.0123", "1.23e+04", "1,2"]

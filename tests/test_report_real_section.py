"""REPORT's section on a real model: the dense model against chance on the tasks its grid evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest

from depthprune.grid.results import iter_dense
from depthprune.report import reported
from depthprune.report.sections import real_section as _real_section

ARCHIVE = Path(__file__).resolve().parents[1] / "archive"


@pytest.mark.skipif(not (ARCHIVE / "real.jsonl.xz").is_file(), reason="no real grid archive committed")
def test_the_dense_table_has_the_grids_own_tasks_first_with_their_chance_and_interval():
    _, results = reported([ARCHIVE])
    dense = {(d["grid"], d["model"]): d for d in iter_dense([ARCHIVE])}
    lines = _real_section(results, dense, [], ARCHIVE.parent / "REPORT.md")
    text = "\n".join(lines)
    assert "small calibration sets" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and " | acc " in line]
    tasks = [row.split("|")[1].strip() for row in rows]
    assert tasks[:3] == ["cloze", "definition", "hypernym"], tasks  # the WordNet tasks the real grid evaluates
    for row in rows[:3]:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert cells[5] == "0.25" and "[" in cells[4], row  # chance from the frozen baselines; the grid's interval

"""REPORT's section on a real model: the dense model against chance on the tasks its grid evaluated."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from depthprune.report import reported
from depthprune.report.sections import real_section as _real_section
from depthprune.results.store import iter_dense

ARCHIVE = Path(__file__).resolve().parents[2] / "archive"


@pytest.mark.skipif(not (ARCHIVE / "real.jsonl.xz").is_file(), reason="no real grid archive committed")
def test_the_dense_table_has_the_grids_own_tasks_first_with_their_chance_and_interval():
    """Per real model: its table lists first, for acc and acc_norm, every task the grid's dense record was
    evaluated on, with the dense record's accuracy (in %) inside the grid slice's interval and the task's
    chance (1/4: the WordNet tasks have four choices); tasks only the model card measured follow, without a
    grid figure."""
    _, results = reported([ARCHIVE])
    dense = {(d["grid"], d["model"]): d for d in iter_dense([ARCHIVE])}
    text = "\n".join(_real_section(results, dense, [], ARCHIVE.parent / "REPORT.md"))
    models = sorted({(r.identity.grid, r.identity.model) for r in results if r.identity.profile == "real"})
    assert models, "no real-profile results in the archive"
    for grid, model in models:
        section = text.split(f"### {model} ({grid} grid)\n")[1].split("\n### ")[0]
        n_cells = sum(r.identity.grid == grid and r.identity.model == model for r in results)
        assert f" {n_cells} cells here " in section
        metrics = dense[(grid, model)]["metrics"]
        own = sorted({k.rsplit("_acc", 1)[0] for k in metrics if re.fullmatch(r"[a-z]+_acc(_norm)?", k)}
                     - {"avg", "lambada"})
        assert own == ["cloze", "definition", "hypernym"], own  # the WordNet tasks the real grid evaluates
        expected = [(task, metric) for task in own for metric in ("acc", "acc_norm") if f"{task}_{metric}" in metrics]
        rows = [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines()
                if line.startswith("| ") and re.match(r"\| \S+ +\| acc", line)]
        assert [(r[0], r[1]) for r in rows[:len(expected)]] == expected, rows
        for row in rows[:len(expected)]:
            point, lo, hi = map(float, re.fullmatch(r"([\d.]+)\s\[([\d.]+),\s([\d.]+)\]", row[4]).groups())
            assert point == round(100 * metrics[f"{row[0]}_{row[1]}"], 1) and lo < point < hi, row
            assert float(row[5]) == 0.25, row
        assert all(r[4] == "–" for r in rows[len(expected):]), rows  # the card's other tasks: no grid figure

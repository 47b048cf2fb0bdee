"""Report analysis functions on constructed results, and the report written end to end."""

from __future__ import annotations

import math
import re

import pytest

from depthprune.grid.results import write_result
from depthprune.report import write_report
from depthprune.report import analysis as A
from tests.fixtures import result_v2


def _cell(model, objective, search, removed, loss, acc, evals=10, budget=3, n_layers=12):
    return result_v2(model, objective, search, removed, loss, budget=budget, n_layers=n_layers, evaluations=evals,
                     metrics={"avg_acc": acc, "c4_ppl": math.exp(loss), "hellaswag_acc_norm": acc}, grid="t")


def test_set_statistics():
    assert A.jaccard([1, 2], [2, 3]) == pytest.approx(1 / 3)
    assert A.contiguity([3, 4, 9]) == pytest.approx(2 / 3)
    assert A.relative_depth([0, 11], 12) == pytest.approx(0.5)
    assert A.mean_pairwise_jaccard([[1, 2], [1, 2], [3, 4]]) == pytest.approx(1 / 3)


def test_alignment_sign_and_small_n_note():
    rows = [_cell("m", "margin", s, [i], loss=1 + i, acc=0.9 - 0.1 * i) for i, s in enumerate("abcdef")]
    corr = A.alignment(rows)
    assert corr.rho == pytest.approx(1.0) and corr.n == 6 and corr.note == ""
    rows = [_cell("m", "ppl", s, [i % 2], loss=1 + i, acc=0.5 + 0.1 * i) for i, s in enumerate("abcd")]
    corr = A.alignment(rows)
    assert corr.rho == pytest.approx(-1.0) and "only 2 distinct" in corr.note


def test_variance_shares_separate_objective_from_searcher():
    rows = []
    for o, base in (("ppl", 1.0), ("margin", 2.0)):
        for s, bump in (("a", 0.0), ("b", 0.01), ("c", 0.02)):
            rows.append(_cell("m", o, s, [1], loss=1, acc=base + bump))
    vs = A.variance_shares(rows, "avg_acc")
    assert vs.objective > 0.99 and vs.searcher < 0.01 and vs.n == 6


def test_report_end_to_end(tmp_path):
    results = tmp_path / "results"
    searchers = ["oneshot", "greedy", "beam", "ga", "bo"]
    for i, s in enumerate(searchers):
        write_result(results / "t" / f"m-ppl-{s}-M3.json", _cell("m", "ppl", s, [7, 8, 9], 2.0 + 0.01 * i, 0.40 + 0.01 * i))
        write_result(results / "t" / f"m-margin-{s}-M3.json",
                     _cell("m", "margin", s, [1 + i % 2, 5, 10], -0.2 + 0.01 * i, 0.60 - 0.01 * i))
    out = write_report([results], tmp_path / "REPORT.md")
    text = out.read_text()
    assert "### m · ppl · M=3" in text
    assert re.search(r"\| oneshot +\| 7,8,9 +\| 2\.0000", text)
    claims = text[text.index("## The paper's claims"):text.index("## Paper grid")]
    # ppl removes 7,8,9 under every searcher, margin a scattered set: 5.1a holds on this grid
    row_51a = next(line for line in claims.splitlines() if line.startswith("| 5.1a "))
    assert "HELD" in row_51a and "NOT HELD" not in row_51a, row_51a
    assert "reshape the resulting sets of pruned layers" in claims
    assert "Not run here" in text
    assert (tmp_path / "figures" / "heatmap-t-m-ppl.png").stat().st_size > 1000
    assert (tmp_path / "figures" / "cost-quality-t.png").exists()

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


def _conds(rows):
    return A.by_condition(rows)


def test_structure_verdicts_follow_the_data():
    searchers = "abcd"
    late_block = [_cell("m", "ppl", s, [7, 8, 9], 1.0, 0.5) for s in searchers]
    early_spread = [_cell("m", "ppl", s, [0, 3, 6], 1.0, 0.5) for s in searchers]
    margin = [_cell("m", "margin", s, [1, 4, 10], 1.0, 0.5) for s in searchers]
    differ, shape = A.verdict_structure(_conds(late_block + margin))
    assert (differ.verdict, shape.verdict) == ("held", "held")
    differ, shape = A.verdict_structure(_conds(early_spread + margin))
    assert (differ.verdict, shape.verdict) == ("held", "not held")
    same = [_cell("m", "margin", s, [7, 8, 9], 1.0, 0.5) for s in searchers]
    differ, _ = A.verdict_structure(_conds(late_block + same))
    assert differ.verdict == "not held"
    differ, shape = A.verdict_structure(_conds(late_block))
    assert differ.verdict == shape.verdict == "not measured"


def test_alignment_and_search_verdicts_follow_the_data():
    ppl = [_cell("m", "ppl", s, [i], loss=1 + 0.1 * i, acc=0.5 + 0.01 * i) for i, s in enumerate("abcdef")]
    margin = [_cell("m", "margin", s, [i + 6], loss=1 + 0.1 * i, acc=0.6 - 0.01 * i) for i, s in enumerate("abcdef")]
    assert A.verdict_alignment(_conds(ppl + margin)).verdict == "held"
    flipped = [_cell("m", "margin", s, [i + 6], loss=1 + 0.1 * i, acc=0.5 + 0.01 * i) for i, s in enumerate("abcdef")]
    assert A.verdict_alignment(_conds(ppl + flipped)).verdict == "not held"
    cheap_and_dear = [_cell("m", "ppl", s, [1, 2], 1.0, 0.5, evals=e) for s, e in (("a", 1), ("b", 100))]
    assert A.verdict_search(_conds(cheap_and_dear)).verdict == "held"
    far_apart = [_cell("m", "ppl", "a", [1, 2], 1.0, 0.5, evals=1), _cell("m", "ppl", "b", [5, 6], 1.0, 0.6, evals=100)]
    assert A.verdict_search(_conds(far_apart)).verdict == "not held"


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
    assert "**HELD** — The objectives remove structurally different layers" in text
    assert "**HELD** — Perplexity removals concentrate in contiguous mid-to-late blocks" in text
    assert "Not run here" in text
    assert (tmp_path / "figures" / "heatmap-t-m-ppl.png").stat().st_size > 1000
    assert (tmp_path / "figures" / "cost-quality-t.png").exists()

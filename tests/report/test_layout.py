"""REPORT.md for a reader: the verdict matrix first, lines at most 160 wide, statistics in columns,
the variance shares the ones claim 5.2 judges, every accuracy with its interval."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from depthprune.report import claims, intervals
from depthprune.report import verdicts as report_verdicts
from depthprune.report.variance import share_rows
from depthprune.report.wrap import _RISKY, WIDTH, wrap_markdown
from tests.noise_grids import grid_results

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "REPORT.md"
T = claims.load_thresholds()
FAST = claims.with_threshold(claims.with_threshold(T, "5.2", "n_resamples", 200), "5.3", "n_resamples", 200)


PAGES = sorted((ROOT / "reports").glob("*.md"))


@pytest.mark.skipif(not REPORT.is_file(), reason="no committed REPORT.md")
@pytest.mark.parametrize("page", [REPORT, *PAGES], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_report_line_is_wider_than_160(page):
    """REPORT.md and every page under reports/ (tables included: a wide one is split by columns)."""
    wide = [(n, len(line)) for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > WIDTH and not line.startswith("![")]
    assert not wide, f"{page.name} lines wider than {WIDTH} (line, width): {wide[:10]}"


def test_a_table_wider_than_160_splits_by_columns_and_keeps_its_keys():
    from depthprune.report.cells import NBSP, table

    rows = [[f"row{i}", *(f"{i}.{j} [{i}.0, {j}.9]" + "x" * 8 for j in range(10))] for i in range(3)]
    headers = ["key", *(f"column {j}" for j in range(10))]
    text = table(rows, headers)
    parts = text.split("\n\n")
    assert len(parts) > 1 and all(len(line) <= WIDTH for line in text.splitlines())
    assert all(p.splitlines()[0].startswith("| key ") for p in parts)
    cells = [c.strip().replace(NBSP, " ") for p in parts for line in p.splitlines()[2:]
             for c in line.strip("|").split("|")[1:]]
    assert sorted(cells) == sorted(c for row in rows for c in row[1:])  # every cell once, none lost
    narrow = table(rows[:1], headers[:3])
    assert "\n\n" not in narrow and narrow.splitlines()[0].startswith("| key ")


@pytest.mark.skipif(not REPORT.is_file(), reason="no committed REPORT.md")
def test_the_first_screen_is_the_verdict_matrix_and_a_line_per_claim():
    lines = REPORT.read_text(encoding="utf-8").splitlines()
    first = "\n".join(lines[:50])
    assert "## Verdicts" in first and "| claim " in first and "What was found" in first
    assert all(f"- **{c}** (" in "\n".join(lines[:60]) for c, claim in claims.CLAIMS.items() if not claim.reads_healed)


def test_wrapping_keeps_every_word_and_never_starts_a_line_with_markup():
    words = ["word"] * 30 + ["-", "1.", "#", "|", ">x", "**bold**", "`a b`"] * 12
    line = "- " + " ".join(words)
    out = wrap_markdown([line, "| a table | row |" * 20, "```", "x " * 200, "```"], 60)
    prose = out[:-4]
    assert " ".join(x.strip() for x in prose).removeprefix("- ") == " ".join(words)
    assert all(len(x) <= 60 or " " not in x.strip() for x in prose)
    assert all(x.startswith("  ") and not _RISKY.match(x.split()[0]) for x in prose[1:])
    assert out[-4:] == ["| a table | row |" * 20, "```", "x " * 200, "```"]


def test_a_verdicts_statistic_splits_into_measures():
    v = claims.Verdict(claims.CLAIMS["5.2"], "g", claims.NOT_MEASURED, {"D_a": 0.5, "D_a_low": 0.1, "D_a_high": 0.9, "D_a_mde": 0.3,
                                                          "n_items_mde": 2.0, "extra": None}, {}, 1, 2, "why")
    assert [(m.name, m.value, m.low, m.high, m.mde) for m in v.measures] == [
        ("D_a", 0.5, 0.1, 0.9, 0.3), ("n_items_mde", 2.0, None, None, None), ("extra", None, None, None, None)]


def test_every_claim_has_a_gist_and_its_threshold_a_rule():
    for claim in claims.CLAIMS.values():
        assert claim.gist, claim.id
        params = {r.param for r in claim.rules}
        assert claim.threshold in params and params <= set(claim.parameters), claim.id


def test_the_matrix_has_a_column_per_grid_and_says_not_run_for_declared_grids_without_results():
    verdicts = claims.judge_all(grid_results(0, n_items=200, n_windows=16), FAST)
    lines = report_verdicts.matrix(verdicts, ["paper", "noise"])  # a declared grid with results is no NOT RUN column
    rows = lines[0].splitlines()
    assert [c.strip() for c in rows[0].split("|")[3:-1]] == ["`noise`", "`paper`"]
    five_two = next(r for r in rows if r.startswith("| 5.2 "))
    v = next(v for v in verdicts if v.claim.id == "5.2")
    assert f"**{v.outcome}** ({v.n_conditions} · {v.n_distinct}; MDE " in five_two
    # NOT RUN with a no-break space: a browser squeezing the table keeps it on one line
    assert five_two.rstrip(" |").endswith("NOT\u00a0RUN") and "`paper`" in lines[-1]
    assert all(len(r) <= report_verdicts.WIDTH for r in rows)
    # the statistics whose MDE a cell gives are named in the legend, not in a column of their own
    assert "MDE of" not in rows[0] and "5.2 D_c4_ppl, D_avg_acc" in lines[-1]


def test_pooled_variance_shares_are_the_5_2_verdicts_statistic():
    rows = grid_results(3, n_items=200, n_windows=16, acc_searcher=0.03)
    [v] = claims.CLAIMS["5.2"].verdicts(rows, FAST)
    pooled = {r.metric: r for r in share_rows(rows, FAST) if r.model == "pooled"}
    assert pooled["log C4 perplexity"].corrected.gap == pytest.approx(v.statistic["D_c4_ppl"])
    assert pooled["avg accuracy"].corrected.gap == pytest.approx(v.statistic["D_avg_acc"])
    per_pair = [r for r in share_rows(rows, FAST) if r.model != "pooled" and r.metric == "avg accuracy"]
    # noise adds variance that the uncorrected decomposition books to the searcher
    assert np.mean([r.uncorrected.searcher for r in per_pair]) > np.mean([r.corrected.searcher for r in per_pair])


def test_an_accuracy_interval_is_seeded_and_contains_its_value():
    rng = np.random.default_rng(0)
    bits = "".join("1" if x else "0" for x in rng.random(800) < 0.62)
    r = {"item_outcomes": {"t": {"acc": bits}}, "item_clusters": {}}
    a = intervals.accuracy(r, ["t"], lambda _t: "acc")
    assert a == intervals.accuracy(r, ["t"], lambda _t: "acc") and a.low < a.value < a.high
    assert a != intervals.accuracy(r, ["t"], lambda _t: "acc", seed=1)
    w = intervals.wilson(a.value, len(bits))  # no clusters: the bootstrap and Wilson agree at 800 items
    assert a.low == pytest.approx(w.low, abs=0.01) and a.high == pytest.approx(w.high, abs=0.01)
    assert intervals.accuracy({"item_outcomes": {}}, ["t"], lambda _t: "acc") is None
    assert re.fullmatch(r"\d+\.\d \[\d+\.\d, \d+\.\d\]", a.points())
    half = 1.96 * math.sqrt(0.25 / 10_000)
    assert intervals.wilson(0.5, 10_000).high == pytest.approx(0.5 + half, rel=1e-3)


def test_a_task_answered_all_right_still_has_an_interval():
    r = {"item_outcomes": {"t": {"acc": "1" * 200}}}
    a = intervals.accuracy(r, ["t"], lambda _t: "acc")
    assert a.value == a.high == pytest.approx(1.0) and a.low == pytest.approx(intervals.wilson(1.0, 200).low) and a.low < 0.99


def test_an_interval_never_breaks_inside_a_table_cell():
    from depthprune.report.cells import NBSP, keep_together

    assert keep_together("66.4 [60.5, 72.0]") == f"66.4{NBSP}[60.5,{NBSP}72.0]"  # short: value and interval whole
    assert keep_together("+0.24 [-0.48, +0.81] (12)") == f"+0.24 [-0.48,{NBSP}+0.81] (12)"  # long: a break before [
    assert keep_together("0.0114 [0.0107, 0.0121]") == f"0.0114 [0.0107,{NBSP}0.0121]"
    assert keep_together("[–, –]") == f"[–,{NBSP}–]"
    for untouched in ("rho_margin [calibration_loss]", "too few (2)", "NOT HELD", 3, None):
        assert keep_together(untouched) == untouched

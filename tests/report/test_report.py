"""Report analysis functions on constructed results, and the report written end to end."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from depthprune.report import analysis, verdicts, write_report
from depthprune.results.store import write_result
from tests.fixtures import result_v2


def _cell(model, objective, search, removed, loss, acc, evals=10, budget=3, n_layers=12):
    return result_v2(model, objective, search, removed, loss, budget=budget, n_layers=n_layers, evaluations=evals,
                     metrics={"avg_acc": acc, "c4_ppl": math.exp(loss), "hellaswag_acc_norm": acc}, grid="t")


def test_set_statistics():
    assert analysis.jaccard([1, 2], [2, 3]) == pytest.approx(1 / 3)
    assert analysis.contiguity([3, 4, 9]) == pytest.approx(2 / 3)
    assert analysis.relative_depth([0, 11], 12) == pytest.approx(0.5)
    assert analysis.mean_pairwise_jaccard([[1, 2], [1, 2], [3, 4]]) == pytest.approx(1 / 3)


def test_alignment_sign_and_small_n_note():
    rows = [_cell("m", "margin", s, [i], loss=1 + i, acc=0.9 - 0.1 * i) for i, s in enumerate("abcdef")]
    corr = analysis.alignment(rows)
    assert corr.rho == pytest.approx(1.0) and corr.n == 6 and corr.note == ""
    rows = [_cell("m", "ppl", s, [i % 2], loss=1 + i, acc=0.5 + 0.1 * i) for i, s in enumerate("abcd")]
    corr = analysis.alignment(rows)
    assert corr.rho == pytest.approx(-1.0) and "only 2 distinct" in corr.note


def test_variance_shares_separate_objective_from_searcher():
    rows = []
    for o, base in (("ppl", 1.0), ("margin", 2.0)):
        for s, bump in (("a", 0.0), ("b", 0.01), ("c", 0.02)):
            rows.append(_cell("m", o, s, [1], loss=1, acc=base + bump))
    vs = analysis.variance_shares(rows, "avg_acc")
    assert vs.objective > 0.99 and vs.searcher < 0.01 and vs.n == 6


def test_report_end_to_end(tmp_path):
    results = tmp_path / "results"
    searchers = ["oneshot", "greedy", "beam", "ga", "bo"]
    for i, s in enumerate(searchers):
        write_result(results / "t" / f"m-ppl-{s}-M3.json", _cell("m", "ppl", s, [7, 8, 9], 2.0 + 0.01 * i, 0.40 + 0.01 * i))
        write_result(results / "t" / f"m-margin-{s}-M3.json",
                     _cell("m", "margin", s, [1 + i % 2, 5, 10], -0.2 + 0.01 * i, 0.60 - 0.01 * i))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "gpu.toml").write_text('[grid]\nname = "big"\ndevice = "cuda"\ndescription = "the big one"\n')
    (cases / "ctl.toml").write_text('[grid]\nname = "ctl"\nkind = "controls"\ncompare_with = "big"\n')
    out = write_report([results], tmp_path / "REPORT.md", cases_dir=cases)
    text = out.read_text()
    # the first screen: the verdict matrix, the grid with results, then the declared grid without (not controls)
    matrix = text[text.index("## Verdicts"):text.index("What was found")]
    header = next(line for line in matrix.splitlines() if line.startswith("| claim "))
    assert header.index("`t`") < header.index("`big`") and "`ctl`" not in header
    row_51a = next(line for line in matrix.splitlines() if line.startswith("| 5.1a "))
    # ppl removes 7,8,9 under every searcher, margin a scattered set: 5.1a holds on this grid
    assert "**HELD**" in row_51a and "NOT HELD" not in row_51a and row_51a.rstrip(" |").endswith(verdicts.NOT_RUN_CELL), row_51a
    assert "## Grids not run yet" in text and "`big` (" in text and "the big one" in text
    claims = text[text.index("## The claims in detail"):text.index("## Objective vs searcher")]
    assert "reshape the resulting sets of pruned layers" in claims
    # the per-condition tables are on the grid's page, accuracies with their interval column
    page = (tmp_path / "reports" / "t.md").read_text()
    assert "### m · ppl · M=3" in page and "(reports/t.md)" in text and "../REPORT.md" in page
    assert re.search(r"\| oneshot +\| 7,8,9 +\| 2\.0000", page)
    assert re.search(r"\| oneshot +\| 40\.0 \[–\] +\| – ", page)  # avg acc first; no per-item outcomes: no interval
    assert (tmp_path / "figures" / "heatmap-t-m-ppl.png").stat().st_size > 1000
    assert (tmp_path / "figures" / "cost-quality-t.png").exists()
    alone = write_report([results], tmp_path / "R2.md", cases_dir=None).read_text()
    assert "NOT RUN" not in alone and verdicts.NOT_RUN_CELL not in alone


def test_a_stale_page_goes_and_a_hand_written_one_stays(tmp_path):
    results = tmp_path / "results"
    write_result(results / "t" / "m-ppl-oneshot-M3.json", _cell("m", "ppl", "oneshot", [7, 8, 9], 2.0, 0.4))
    from depthprune.report import GENERATED

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "gone.md").write_text(f"{GENERATED}\n# an old grid's page\n")
    (reports / "notes.md").write_text("# mine\n")
    write_report([results], tmp_path / "REPORT.md", cases_dir=None)
    assert sorted(p.name for p in reports.iterdir()) == ["baselines.md", "firmness.md", "notes.md", "t.md"]  # always: baselines, firmness


def test_paired_difference_sees_a_real_gap_and_not_noise():
    from depthprune.data.protocol import headline
    rng = __import__("random").Random(0)
    base = "".join(rng.choice("01") for _ in range(200))
    better = "".join("1" if (c == "1" or rng.random() < 0.3) else "0" for c in base)  # ~15 points better
    noisy = "".join(c if rng.random() < 0.9 else rng.choice("01") for c in base)       # same accuracy, shuffled
    a = {t: {"acc": better, "acc_norm": better} for t in ("hellaswag", "boolq")}
    b = {t: {"acc": base, "acc_norm": base} for t in ("hellaswag", "boolq")}
    c = {t: {"acc": noisy, "acc_norm": noisy} for t in ("hellaswag", "boolq")}
    real = analysis.paired_difference(a, b, ("hellaswag", "boolq"), headline)
    assert real.delta > 0.1 and real.distinguishable and real.n_items == 400
    noise = analysis.paired_difference(c, b, ("hellaswag", "boolq"), headline)
    assert abs(noise.delta) < 0.03 and not noise.distinguishable
    assert analysis.paired_difference(a, {}, ("hellaswag",), headline) is None
    assert analysis.paired_difference(a, b, ("hellaswag",), headline, seed=1) != analysis.paired_difference(a, b, ("hellaswag",), headline, seed=2)


def test_noise_section_judges_each_solution_against_oneshot():
    from depthprune.report.tables import noise_section as _noise_section

    good, bad = "1" * 150 + "0" * 50, "1" * 100 + "0" * 100
    outcomes = lambda s: {t: {"acc": s, "acc_norm": s} for t in ("hellaswag", "winogrande", "arc_easy",  # noqa: E731
                                                                  "arc_challenge", "piqa", "boolq")}
    rows = [_cell("m", "ppl", "oneshot", [1, 2], 1.0, 0.5), _cell("m", "ppl", "greedy", [3, 4], 1.0, 0.75),
            _cell("m", "ppl", "beam", [1, 2], 1.0, 0.5)]
    rows = [r.replace(item_outcomes=outcomes(s)) for r, s in zip(rows, (bad, good, bad))]
    text = "\n".join(_noise_section(analysis.by_condition(rows)))
    assert "1 of 1 different solutions differ from oneshot's beyond the evaluation's noise" in text
    assert re.search(r"\| greedy +\| \+25\.0 +\| \[\+2\d\.\d,\s\+2\d\.\d\] +\| yes", text), text
    assert re.search(r"\| beam +\| same set", text)
    assert "Not measured" in "\n".join(_noise_section(analysis.by_condition([_cell("m", "ppl", "oneshot", [1], 1.0, 0.5)])))


def test_a_real_profile_grid_gets_its_own_columns_section_and_single_layer_figure(tmp_path):
    """A grid on smollm2-135m (profile real): its own task as a column (not the paper's six),
    a section saying it is one small real model, and the single-block removal profile."""
    import json

    results = tmp_path / "results"
    for i, s in enumerate(["oneshot", "greedy"]):
        r = result_v2("smollm2-135m", "ppl", s, [12, 13, 25], 3.9 - 0.01 * i, budget=3, n_layers=30, grid="real",
                      metrics={"avg_acc": 0.4 + 0.01 * i, "nextsent_acc_norm": 0.4 + 0.01 * i, "c4_ppl": 50.0})
        r = r.replace(identity=dataclasses.replace(r.identity, profile="real"))
        write_result(results / "real" / f"{r['cell']}.json", r)
    (results / "real" / "dense").mkdir()
    (results / "real" / "dense" / "smollm2-135m.json").write_text(json.dumps({
        "grid": "real", "model": "smollm2-135m", "metrics": {"nextsent_acc_norm": 0.6, "nextsent_acc": 0.5},
        "objectives": {"ppl": {"dense_calibration_loss": 3.0, "prior": [3.0 + 0.1 * k for k in range(30)]}}}))
    text = write_report([results], tmp_path / "REPORT.md", cases_dir=None).read_text()
    page = (tmp_path / "reports" / "real.md").read_text()
    table = page[page.index("### smollm2-135m · ppl · M=3"):].split("\n\n")[2]  # the accuracies
    assert "nextsent (n)" in table.splitlines()[0] and "HS (n)" not in table.splitlines()[0]
    assert "One small real model, not the paper's." in text and "SmolLM2-135M-Instruct" in text
    assert (tmp_path / "figures" / "single-layer-real-smollm2-135m.png").stat().st_size > 1000
    assert "single-layer-real-smollm2-135m.png" in text


def test_a_grid_run_in_part_says_which_models_lack_results(tmp_path):
    from depthprune.report import readme_block

    results = tmp_path / "results"
    searchers = ["oneshot", "greedy", "beam"]
    for i, s in enumerate(searchers):
        write_result(results / "t" / f"tiny-llama3-ppl-{s}-M3.json",
                     _cell("tiny-llama3", "ppl", s, [7, 8, 9], 2.0 + 0.01 * i, 0.40 + 0.01 * i))
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t.toml").write_text('[grid]\nname = "t"\nmodels = ["tiny-llama3", "tiny-qwen3"]\nobjectives = ["ppl"]\n'
                                  f'searchers = {searchers!r}\nbudgets = [3]\n'.replace("'", '"'))
    text = write_report([results], tmp_path / "REPORT.md", cases_dir=cases).read_text()
    assert "Run in part: `t`" in text
    assert "`t` is run in part (cells with results: tiny-qwen3 0 of 3)" in text  # tiny-llama3 has all 3
    readme = tmp_path / "README.md"
    block = "\n".join(readme_block([results], readme, tmp_path / "REPORT.md", cases_dir=cases))
    assert "Run in part: `t`" in block
    write_result(results / "t" / "tiny-qwen3-ppl-oneshot-M3.json", _cell("tiny-qwen3", "ppl", "oneshot", [1], 2.0, 0.4))
    text = write_report([results], tmp_path / "REPORT.md", cases_dir=cases).read_text()
    assert "tiny-qwen3 1 of 3" in text
    broken = cases / "t.toml"
    broken.write_text(broken.read_text() + "[objective.ppl]\nbogus = 1\n")  # valid TOML, not a valid grid: nothing claimed
    text = write_report([results], tmp_path / "REPORT.md", cases_dir=cases).read_text()
    assert "run in part" not in text.lower()


def test_the_bootstraps_vectorised_spearman_is_scipys_spearmanr_row_by_row():
    """alignment's bootstrap ranks all resamples at once; each row must be spearmanr's rho, ties and
    constant rows (nan) included."""
    import warnings

    import numpy as np
    from scipy import stats

    rng = np.random.default_rng(0)
    for n in (3, 5, 14, 60):
        for kind in ("normal", "ties", "constant"):
            a = rng.normal(size=(9, n)) if kind == "normal" else rng.integers(0, 3, size=(9, n)).astype(float)
            b = rng.normal(size=(9, n))
            if kind == "constant":
                a[0] = 1.0
            got = analysis._spearman_along(a, b)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = np.array([stats.spearmanr(x, y).statistic for x, y in zip(a, b)])
            assert np.array_equal(np.isnan(got), np.isnan(want))
            assert np.allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=0, atol=1e-12)
            assert np.allclose(analysis._spearman_along(a.T, b.T, axis=0), got, rtol=0, atol=1e-15, equal_nan=True)

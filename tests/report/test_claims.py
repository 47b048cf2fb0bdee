"""The claim verdicts (depthprune.report.claims) on constructed grids.

Every verdict function comes out HELD, NOT HELD and NOT MEASURED on a grid built so that
its statistic lands clearly on each side of the threshold; further tests check that grids
are never pooled, that the sensitivity table flips where the statistic crosses the
threshold, that thresholds come from the file, and that every quote is in the paper's text.
Pure Python on dicts: no model is loaded.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from pathlib import Path

import pytest

from depthprune.report import claims
from depthprune.results.schema import Result
from tests.fixtures import result_v2

SEVEN = ["oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs"]
PAPER = Path(__file__).resolve().parents[2].parent / "shared" / "paper" / claims.PAPER_TEXT

T = claims.load_thresholds()
FAST = claims.with_threshold(T, "5.2", "n_resamples", 200)  # the bootstrap is the only slow part


def cell(objective, search, removed, loss=1.0, *, model="m", grid="g", n_layers=12, metrics=None, lf=None,
         seconds=None, prior=None, trace=None, dense=None, variant="default", seed=0):
    """A schema-2 result (tests.fixtures.result_v2) with the fields the claims read set as given."""
    r = result_v2(model, objective, search, removed, loss, budget=len(removed), n_layers=n_layers, metrics=metrics,
                  grid=grid, variant=variant, seed=seed)
    cost = {**r.cost, **({"layer_forwards": lf} if lf is not None else {}),
            **({"seconds": seconds} if seconds is not None else {})}
    return r.replace(cost=cost, prior=prior, trace=trace or [],
                     **({"dense_calibration_loss": dense} if dense is not None else {}))


def both(sets_ppl, sets_margin, searchers=SEVEN, **kw):
    """One result per searcher under each objective; sets given per searcher or one for all."""
    out = []
    for i, s in enumerate(searchers):
        for objective, sets in (("ppl", sets_ppl), ("margin", sets_margin)):
            if sets is not None:
                out.append(cell(objective, s, sets[i] if isinstance(sets[0], list) else sets, **kw))
    return out


def one(verdicts):
    assert len(verdicts) == 1
    return verdicts[0]


OFFSETS = [0.1 * math.sin(k) for k in range(32)]  # the windows' own difficulty, the same for every solution


def measured(rows, n_items=4000):
    """Give each result the per-item and per-window outcomes its metrics imply, with next to no noise
    between solutions: accuracy p = the first round(p n) of n shared items right (nested: solutions
    differ only on the items between their accuracies), window NLLs log(c4_ppl) + the same offsets."""
    mean_offset = sum(OFFSETS) / len(OFFSETS)
    out = []
    for r in rows:
        m, fields = r.metrics, {}
        if "avg_acc" in m:
            k = round(m["avg_acc"] * n_items)
            fields["item_outcomes"] = {"t": {"acc": "1" * k + "0" * (n_items - k)}}
            fields["evaluation_protocol"] = {"zero_shot": {"headline_metric": {"t": "acc"}}}
        if "c4_ppl" in m:
            fields["window_nll"] = {"c4": [math.log(m["c4_ppl"]) + o - mean_offset for o in OFFSETS]}
        out.append(r.replace(**fields))
    return out


# -- 5.1a ----------------------------------------------------------------------------------------

def test_5_1a_held_when_objectives_remove_different_layers():
    v = one(claims.CLAIMS["5.1a"].verdicts(both([8, 9, 10], [1, 4, 6]), T))
    assert v.outcome == claims.HELD
    assert v.statistic["gap"] == pytest.approx(1.0)  # within 1, across 0
    assert (v.n_conditions, v.n_distinct) == (1, 2)


def test_5_1a_not_held_when_each_searcher_keeps_its_set_across_objectives():
    sets = [[i, i + 1, i + 2] for i in range(7)]  # searchers disagree, objectives agree
    v = one(claims.CLAIMS["5.1a"].verdicts(both(sets, sets), T))
    assert v.outcome == claims.NOT_HELD
    assert v.statistic["gap"] < 0
    assert v.n_distinct == 7


def test_5_1a_not_measured_without_the_margin_objective():
    v = one(claims.CLAIMS["5.1a"].verdicts(both([8, 9, 10], None), T))
    assert v.outcome == claims.NOT_MEASURED and "both objectives" in v.reason
    assert (v.n_conditions, v.n_distinct) == (0, 0)


# -- 5.1b ----------------------------------------------------------------------------------------

def test_5_1b_contiguity_held_when_ppl_removes_runs_and_margin_scatters():
    v = one(claims.CLAIMS["5.1b-contiguity"].verdicts(both([8, 9, 10], [1, 4, 7]), T))
    assert v.outcome == claims.HELD and v.statistic["gap"] == pytest.approx(1.0)


def test_5_1b_contiguity_not_held_when_margin_is_the_contiguous_one():
    v = one(claims.CLAIMS["5.1b-contiguity"].verdicts(both([1, 4, 7], [8, 9, 10]), T))
    assert v.outcome == claims.NOT_HELD and v.statistic["gap"] == pytest.approx(-1.0)


def test_5_1b_contiguity_not_measured_with_one_objective():
    assert one(claims.CLAIMS["5.1b-contiguity"].verdicts(both(None, [1, 4, 7]), T)).outcome == claims.NOT_MEASURED


def test_5_1b_depth_held_for_late_ppl_removals():
    v = one(claims.CLAIMS["5.1b-depth"].verdicts(both([8, 9, 10], [0, 1, 2]), T))
    assert v.outcome == claims.HELD and v.statistic["depth"] == pytest.approx(27 / 33)


def test_5_1b_depth_not_held_for_early_ppl_removals():
    v = one(claims.CLAIMS["5.1b-depth"].verdicts(both([0, 1, 2], [8, 9, 10]), T))  # margin's late sets do not count
    assert v.outcome == claims.NOT_HELD and v.statistic["depth"] == pytest.approx(3 / 33)


def test_5_1b_depth_not_measured_without_ppl():
    assert one(claims.CLAIMS["5.1b-depth"].verdicts(both(None, [8, 9, 10]), T)).outcome == claims.NOT_MEASURED


# -- 5.2 -----------------------------------------------------------------------------------------

EFFECTS = [-0.01, -0.005, 0.0, 0.005, 0.01]  # the searchers' own effect on accuracy


LOG2 = math.log(2)


def shares_grid(ppl_objective_effect=LOG2, ppl_searcher_step=0.001, acc_objective_effect=0.014):
    """Five searchers x two objectives, additive: log c4_ppl = objective + searcher, same for accuracy.
    With acc_objective_effect = 0.014 the objective's and the searchers' sums of squares on accuracy
    are equal (5 * 0.014^2 / 2 = 2 * sum(EFFECTS^2))."""
    out = []
    for k, s in enumerate(SEVEN[:5]):
        for objective, on in (("ppl", 0), ("margin", 1)):
            metrics = {"c4_ppl": 10 * math.exp(on * ppl_objective_effect + ppl_searcher_step * k),
                       "avg_acc": 0.5 + on * acc_objective_effect + EFFECTS[k]}
            out.append(cell(objective, s, [k, k + 1, k + 2], metrics=metrics))
    return measured(out)


def test_5_2_held_when_objective_dominates_ppl_and_matches_searchers_on_accuracy():
    v = one(claims.CLAIMS["5.2"].verdicts(shares_grid(), FAST))
    assert v.outcome == claims.HELD, v.reason
    assert v.statistic["D_c4_ppl_low"] > 0.9
    assert abs(v.statistic["D_avg_acc"]) < 0.05
    assert v.statistic["D_avg_acc_low"] <= v.statistic["D_avg_acc"] <= v.statistic["D_avg_acc_high"]
    assert v.statistic["D_avg_acc_mde"] < T["5.2"]["acc_max_gap"]
    assert (v.n_conditions, v.n_distinct) == (1, 5)


def test_5_2_not_held_when_the_objective_dominates_accuracy_too():
    v = one(claims.CLAIMS["5.2"].verdicts(shares_grid(acc_objective_effect=0.2), FAST))
    assert v.outcome == claims.NOT_HELD and "not comparable" in v.reason
    assert v.statistic["D_avg_acc"] > 0.9


def test_5_2_not_held_when_searchers_dominate_perplexity():
    v = one(claims.CLAIMS["5.2"].verdicts(shares_grid(ppl_objective_effect=0.01, ppl_searcher_step=0.3), FAST))
    assert v.outcome == claims.NOT_HELD and "not dominant" in v.reason
    assert v.statistic["D_c4_ppl"] < 0


def test_5_2_not_measured_without_outcomes():
    """Metrics alone do not say how noisy they are: without per-item outcomes nothing is decided."""
    rows = [Result({k: v for k, v in r.items() if k != "item_outcomes"}) for r in shares_grid()]
    v = one(claims.CLAIMS["5.2"].verdicts(rows, FAST))
    assert v.outcome == claims.NOT_MEASURED and "no per-item outcomes" in v.reason
    assert v.statistic["D_c4_ppl_low"] > 0.9  # the perplexity half is still judged


def test_5_2_not_measured_without_metrics():
    rows = [r.replace(metrics={}) for r in shares_grid()]
    v = one(claims.CLAIMS["5.2"].verdicts(rows, FAST))
    assert v.outcome == claims.NOT_MEASURED and "c4_ppl and avg_acc" in v.reason


def test_5_2_bootstrap_is_seeded():
    a, b = (one(claims.CLAIMS["5.2"].verdicts(shares_grid(acc_objective_effect=0.02), FAST)) for _ in range(2))
    assert a.statistic == b.statistic


# -- 5.3 -----------------------------------------------------------------------------------------

def aligned(objective, sign, *, distinct=5, searchers=SEVEN[:5], loss_sign=None):
    """A condition whose accuracy rises (sign=+1) or falls (-1) as C4 perplexity falls; the
    calibration loss follows C4 perplexity, or runs against it with loss_sign=-1."""
    out = []
    for k, s in enumerate(searchers):
        i = k % distinct
        metrics = {"c4_ppl": 10.0 + i, "avg_acc": 0.5 - sign * 0.01 * i}
        out.append(cell(objective, s, [i, i + 1, i + 2], (loss_sign or 1) * (2.0 + 0.1 * i), metrics=metrics))
    return measured(out)


def conditions(objective, sign, models=("m1", "m2", "m3"), **kw):
    """The same aligned condition for several models: pooled, their ρ clears the interval."""
    out = []
    for m in models:
        for r in aligned(objective, sign, **kw):
            out.append(r.replace(identity=dataclasses.replace(r.identity, model=m)))
    return out


def test_5_3_held_for_negative_ppl_and_positive_margin_alignment():
    v = one(claims.CLAIMS["5.3"].verdicts(conditions("ppl", -1, distinct=7, searchers=SEVEN)
                          + conditions("margin", +1, distinct=7, searchers=SEVEN), T))
    assert v.outcome == claims.HELD, v.reason
    assert v.statistic["rho_ppl"] == pytest.approx(-0.99) and v.statistic["rho_margin"] == pytest.approx(0.99)
    assert v.statistic["rho_ppl_high"] <= T["5.3"]["ppl_max_rho"] <= T["5.3"]["margin_min_rho"] <= \
        v.statistic["rho_margin_low"]
    assert (v.n_conditions, v.n_distinct) == (6, 21)
    assert "c4_ppl" in v.reason  # the axis the verdict used is named


def test_5_3_one_condition_of_five_points_decides_little():
    """ρ = 0.9 on five points is not significant (critical |ρ| ≈ 0.9 at n = 5): the interval spans the threshold."""
    margin = aligned("margin", +1)
    a, b = margin[3]["metrics"], margin[4]["metrics"]
    a["avg_acc"], b["avg_acc"] = b["avg_acc"], a["avg_acc"]  # one adjacent swap: ρ = 0.9
    v = one(claims.CLAIMS["5.3"].verdicts(aligned("ppl", -1) + measured(margin), T))
    assert v.outcome == claims.NOT_MEASURED, v.reason
    assert v.statistic["rho_margin"] == pytest.approx(0.9, abs=0.01)
    assert v.statistic["rho_margin_low"] < T["5.3"]["margin_min_rho"] < v.statistic["rho_margin"]


def test_5_3_not_held_when_ppl_pruning_is_positively_aligned():
    v = one(claims.CLAIMS["5.3"].verdicts(conditions("ppl", +1, distinct=7, searchers=SEVEN)
                          + conditions("margin", +1, distinct=7, searchers=SEVEN), T))
    assert v.outcome == claims.NOT_HELD and v.statistic["rho_ppl_low"] > T["5.3"]["ppl_max_rho"]


def test_5_3_not_measured_with_too_few_distinct_sets():
    rows = aligned("ppl", -1, distinct=4, searchers=SEVEN) + aligned("margin", +1, distinct=4, searchers=SEVEN)
    v = one(claims.CLAIMS["5.3"].verdicts(rows, T))  # seven solutions, four pruned models
    assert v.outcome == claims.NOT_MEASURED and "most distinct: 4" in v.reason


def test_5_3_not_measured_when_the_evaluation_cannot_separate_the_solutions():
    rows = conditions("ppl", -1, distinct=7, searchers=SEVEN) + conditions("margin", +1, distinct=7, searchers=SEVEN)
    rows = measured(rows, n_items=40)  # accuracies 0.44..0.5 on 40 items: within their own noise
    v = one(claims.CLAIMS["5.3"].verdicts(rows, T))
    assert v.outcome == claims.NOT_MEASURED and "reliability" in v.reason


def test_5_3_reports_both_axes_and_judges_on_the_named_one():
    rows = (conditions("ppl", -1, distinct=7, searchers=SEVEN, loss_sign=-1)
            + conditions("margin", +1, distinct=7, searchers=SEVEN, loss_sign=-1))  # own loss runs against c4
    v = one(claims.CLAIMS["5.3"].verdicts(rows, T))
    assert v.outcome == claims.HELD
    own = {d["objective"]: d["rho_calibration_loss"] for d in v.details}
    assert own == {"ppl": pytest.approx(1.0), "margin": pytest.approx(-1.0)}
    assert v.statistic["rho_ppl [calibration_loss]"] == pytest.approx(0.99)  # the other axis, in the table too
    w = one(claims.CLAIMS["5.3"].verdicts(rows, claims.with_threshold(T, "5.3", "x_axis", "calibration_loss")))
    assert w.outcome == claims.NOT_HELD and w.statistic["rho_ppl"] == pytest.approx(0.99)


# -- the second contribution ---------------------------------------------------------------------

def gains_grid(searcher_loss, **losses):
    """ppl: one-shot at loss 2.0, the others at ``searcher_loss`` (or their own in ``losses``); C4
    perplexity 10 for every ppl-chosen and 20 for every margin-chosen solution (objective gap log 2)."""
    out = []
    for s in SEVEN:
        loss = 2.0 if s == "oneshot" else losses.get(s, searcher_loss)
        out.append(cell("ppl", s, [8, 9, 10], loss, metrics={"c4_ppl": 10.0}))
        out.append(cell("margin", s, [1, 4, 7], -1.0, metrics={"c4_ppl": 20.0}))
    return measured(out)


def test_search_gain_held_when_search_gains_are_small_next_to_the_objective_gap():
    v = one(claims.CLAIMS["search-gain"].verdicts(gains_grid(1.995), T))
    assert v.outcome == claims.HELD and v.statistic["ratio"] == pytest.approx(0.005 / math.log(2))


def test_search_gain_not_held_when_one_searcher_gains_much():
    v = one(claims.CLAIMS["search-gain"].verdicts(gains_grid(1.995, bo=1.5), T))  # the largest gain is what must be marginal
    assert v.outcome == claims.NOT_HELD and v.statistic["ratio"] == pytest.approx(0.5 / math.log(2))
    assert v.details[0]["best_searcher"] == "bo"


def test_search_gain_not_measured_when_window_noise_spans_the_threshold():
    rows = gains_grid(1.9)  # ratio 0.1 / log 2 = 0.144 < 0.25, but on noisy windows
    noisy = lambda k, ws: [w + (0.8 if (j + k) % 2 else -0.8) for j, w in enumerate(ws)]  # noqa: E731
    rows = [r.replace(window_nll={"c4": noisy(k, r["window_nll"]["c4"])}) for k, r in enumerate(rows)]
    v = one(claims.CLAIMS["search-gain"].verdicts(rows, T))
    assert v.outcome == claims.NOT_MEASURED, v.reason
    assert v.statistic["ratio_low"] < T["search-gain"]["max_ratio"] < v.statistic["ratio_high"]


def test_search_gain_not_measured_without_oneshot():
    rows = [r for r in gains_grid(1.995) if r.identity.search != "oneshot"]
    assert one(claims.CLAIMS["search-gain"].verdicts(rows, T)).outcome == claims.NOT_MEASURED


def cost_grid(dear_lf, searchers=SEVEN):
    return [cell(o, s, [8, 9, 10], lf=100 if s in ("oneshot", "greedy", "fbs") else dear_lf,
                 seconds=1.0 if s == "oneshot" else 3.0) for o in ("ppl", "margin") for s in searchers]


def test_search_cost_held_when_expensive_searchers_cost_ten_times_oneshot():
    v = one(claims.CLAIMS["search-cost"].verdicts(cost_grid(1000), T))
    assert v.outcome == claims.HELD and v.statistic["ratio"] == pytest.approx(10.0)
    assert v.n_conditions == 2 and v.details[0]["ga_seconds"] == pytest.approx(3.0)
    assert v.statistic["seconds ratio"] == pytest.approx(3.0)
    assert {s: v.statistic[s] for s in ("beam", "ga", "bo", "cbo")} == dict.fromkeys(("beam", "ga", "bo", "cbo"), 10.0)


def test_search_cost_not_held_when_expensive_searchers_are_cheap():
    v = one(claims.CLAIMS["search-cost"].verdicts(cost_grid(150), T))
    assert v.outcome == claims.NOT_HELD and v.statistic["ratio"] == pytest.approx(1.5)
    w = one(claims.CLAIMS["search-cost"].verdicts(cost_grid(150), claims.with_threshold(T, "search-cost", "measure", "seconds")))
    assert w.statistic["ratio"] == pytest.approx(3.0)  # the measure is a parameter


def test_search_cost_not_measured_without_an_expensive_searcher():
    v = one(claims.CLAIMS["search-cost"].verdicts(cost_grid(1000, searchers=["oneshot", "greedy", "fbs"]), T))
    assert v.outcome == claims.NOT_MEASURED and "beam" in v.reason


def test_search_convergence_held_when_searchers_agree():
    v = one(claims.CLAIMS["search-convergence"].verdicts(both([8, 9, 10], [1, 4, 7]), T))
    assert v.outcome == claims.HELD and v.statistic["jaccard"] == 1.0 and v.n_conditions == 2


def test_search_convergence_not_held_when_searchers_disagree():
    sets = [[3 * (i % 4), 3 * (i % 4) + 1, 3 * (i % 4) + 2] for i in range(7)]
    v = one(claims.CLAIMS["search-convergence"].verdicts(both(sets, sets), T))
    assert v.outcome == claims.NOT_HELD and v.statistic["jaccard"] < 0.2


def test_search_convergence_not_measured_with_two_searchers():
    assert one(claims.CLAIMS["search-convergence"].verdicts(both([8, 9, 10], [1, 4, 7], SEVEN[:2]), T)).outcome == claims.NOT_MEASURED


# -- 3.3 -----------------------------------------------------------------------------------------

DENSE = 1.0
PRIOR = [DENSE + 0.1 * (i + 1) for i in range(8)]


def additivity_grid(true_loss, sizes=(2,)):
    """Two searchers whose traces hold every set of the given sizes over 8 layers, scored by true_loss."""
    sets = [list(s) for n in sizes for s in itertools.combinations(range(8), n)]
    trace = [[s, true_loss(s)] for s in sets]
    return [cell("ppl", s, [5, 6], n_layers=8, prior=PRIOR, dense=DENSE, trace=trace[k::2])
            for k, s in enumerate(("greedy", "beam"))]


def _additive(s):
    return DENSE + sum(PRIOR[i] - DENSE for i in s)


def test_3_3_held_when_multi_layer_losses_are_superadditive():
    v = one(claims.CLAIMS["3.3"].verdicts(additivity_grid(lambda s: DENSE + 3 * (_additive(s) - DENSE)), T))
    assert v.outcome == claims.HELD
    assert v.statistic["rel_error"] == pytest.approx(2 / 3)
    assert v.statistic["spearman"] == pytest.approx(1.0)  # still ranked right: one-shot's premise
    assert v.n_distinct == 28  # C(8, 2) evaluated sets, split over two traces


def test_3_3_not_held_when_losses_are_additive():
    v = one(claims.CLAIMS["3.3"].verdicts(additivity_grid(lambda s: _additive(s) + 1e-4 * (sum(s) % 3)), T))
    assert v.outcome == claims.NOT_HELD and v.statistic["rel_error"] < 0.01


def test_3_3_not_measured_without_multi_layer_sets():
    v = one(claims.CLAIMS["3.3"].verdicts(additivity_grid(_additive, sizes=(1,)), T))
    assert v.outcome == claims.NOT_MEASURED and "most: 0" in v.reason


# -- grids are never pooled ----------------------------------------------------------------------

def test_verdicts_never_pool_grids():
    ppl_only = [cell("ppl", s, [8, 9, 10], grid="a") for s in SEVEN]
    margin_only = [cell("margin", s, [1, 4, 6], grid="b") for s in SEVEN]
    split = claims.CLAIMS["5.1a"].verdicts(ppl_only + margin_only, T)
    assert [(v.grid, v.outcome) for v in split] == [("a", claims.NOT_MEASURED), ("b", claims.NOT_MEASURED)]
    # the same results in one grid are measurable: pooling would have changed the verdict
    margin_only = [r.replace(identity=dataclasses.replace(r.identity, grid="a")) for r in margin_only]
    assert one(claims.CLAIMS["5.1a"].verdicts(ppl_only + margin_only, T)).outcome == claims.HELD


def test_each_grid_gets_its_own_verdict():
    agree = both([8, 9, 10], [1, 4, 7], grid="agree")
    disagree = both([[3 * (i % 4), 3 * (i % 4) + 1, 3 * (i % 4) + 2] for i in range(7)], [1, 4, 7], grid="split")
    vs = claims.CLAIMS["search-convergence"].verdicts(disagree + agree, T)
    assert [(v.grid, v.outcome) for v in vs] == [("agree", claims.HELD), ("split", claims.HELD)]
    assert vs[0].statistic["jaccard"] == 1.0 and vs[1].statistic["jaccard"] < 1.0  # margin agrees in "split"
    vs = claims.judge_all(agree + [cell("ppl", "oneshot", [0, 1, 2], grid="b")], FAST)
    unhealed = len([c for c in claims.CLAIMS.values() if not c.reads_healed])  # the healing claims read none here
    assert [v.grid for v in vs] == ["agree"] * unhealed + ["b"] * unhealed


def test_only_the_papers_solutions_count():
    rows = both([8, 9, 10], [1, 4, 7])
    rows += [cell("ppl", "ga", [0, 1, 2], variant="wide"), cell("ppl", "exhaustive", [0, 1, 2]),
             cell("ppl", "ga", [0, 1, 2], seed=1), cell("kl", "ga", [0, 1, 2])]
    v = one(claims.CLAIMS["search-convergence"].verdicts(rows, T))
    assert v.statistic["jaccard"] == 1.0 and v.n_distinct == 2


# -- sensitivity, thresholds, quotes, markdown ---------------------------------------------------

def test_sensitivity_flips_where_the_statistic_crosses_the_threshold():
    rows = claims.sensitivity(cost_grid(1000), "search-cost", "min_ratio", [2.0, 9.99, 10.0, 10.01, 20.0], T)
    assert [(r["value"], r["outcome"]) for r in rows] == [
        (2.0, claims.HELD), (9.99, claims.HELD), (10.0, claims.HELD), (10.01, claims.NOT_HELD), (20.0, claims.NOT_HELD)]
    assert all(r["statistic"]["ratio"] == pytest.approx(10.0) for r in rows)


def test_sensitivity_is_per_grid():
    rows = claims.sensitivity(both([8, 9, 10], [1, 4, 7], grid="x") + both([0, 1, 2], [0, 1, 2], grid="y"),
                         "5.1b-depth", "min_depth", [0.05, 0.5], T)
    assert [(r["grid"], r["value"], r["outcome"]) for r in rows] == [
        ("x", 0.05, claims.HELD), ("x", 0.5, claims.HELD), ("y", 0.05, claims.HELD), ("y", 0.5, claims.NOT_HELD)]


def test_thresholds_load_from_the_file(tmp_path):
    text = claims.THRESHOLDS_FILE.read_text()
    assert "Fixed before REPORT.md is regenerated" in text
    assert T["search-convergence"]["min_jaccard"] == 0.5 and T["5.3"]["x_axis"] == "c4_ppl"
    for claim in claims.CLAIMS.values():
        assert set(claim.parameters) == set(T[claim.id]) and claim.threshold in claim.parameters
    edited = tmp_path / "claims.toml"
    edited.write_text(re.sub(r"min_jaccard = 0\.50", "min_jaccard = 0.90", text))
    loaded = claims.load_thresholds(edited)
    assert loaded["search-convergence"]["min_jaccard"] == 0.9
    sets = [[8, 9, 10]] * 6 + [[8, 9, 11]]  # mean pairwise Jaccard 0.857
    assert one(claims.CLAIMS["search-convergence"].verdicts(both(sets, sets), T)).outcome == claims.HELD
    assert one(claims.CLAIMS["search-convergence"].verdicts(both(sets, sets), loaded)).outcome == claims.NOT_HELD


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace("min_rel_error = 0.10", ""), "missing min_rel_error"),
    (lambda s: s + '\n["5.9"]\nx = 1\n', "unknown section"),
    (lambda s: s.replace('["5.1a"]\n', '["5.1a"]\ntypo = 1\n'), "unknown typo"),
])
def test_a_bad_thresholds_file_is_refused(tmp_path, edit, message):
    bad = tmp_path / "claims.toml"
    bad.write_text(edit(claims.THRESHOLDS_FILE.read_text()))
    with pytest.raises(ValueError, match=message):
        claims.load_thresholds(bad)


@pytest.mark.skipif(not PAPER.is_file(), reason=f"{PAPER} absent (the paper's text is not shipped with the repo)")
def test_every_quote_is_in_the_papers_own_text():
    text = " ".join(PAPER.read_text().split())
    for claim in claims.CLAIMS.values():
        assert " ".join(claim.quote.split()) in text, claim.id


def _table_rows(lines, column):
    """The cells of each body row of the first markdown table with a column headed ``column``."""
    i = next(k for k, line in enumerate(lines) if line.startswith("|") and f"| {column} " in line)
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows


def test_render_claims_has_a_verdict_table_and_a_sensitivity_table_per_grid():
    """Per grid: a verdict table with one row per claim in CLAIMS order, stating the verdict's outcome
    and counts; a measures table captioning each rule; then one matrix of the [sweep] outcomes."""
    rows = both([8, 9, 10], [1, 4, 7], grid="a") + cost_grid(1000)
    lines = claims.render_claims(rows, FAST)
    text = "\n".join(lines)
    for claim in claims.CLAIMS.values():
        assert f"“{claim.quote}”" in text
    verdicts = claims.judge_all(rows, FAST)
    numbers = claims.quote_numbers()
    for grid in ("a", "g"):
        section = text.split(f"### Claims on grid `{grid}`")[1].split("### ")[0].splitlines()
        judged = [v for v in verdicts if v.grid == grid]
        table = _table_rows(section, "outcome")
        assert [r[0] for r in table] == [c for c, claim in claims.CLAIMS.items() if not claim.reads_healed]
        assert table == [[v.claim.id, v.claim.section, f"[{numbers[v.claim.id]}]", f"**{v.outcome}**",
                          str(v.n_conditions), str(v.n_distinct)] for v in judged]
        measures = _table_rows(section, "held if")
        for v in judged:  # each decisive measure's row says the test it must pass, with the value judged
            own = measures[[r[0] for r in measures].index(v.claim.id):][:len(v.measures)]
            assert [r[1] for r in own] == [m.name for m in v.measures]
            for rule in v.claim.rules:
                caption = f"{rule.test.format(claims.helpers.fmt(FAST[v.claim.id][rule.param]))} ({rule.param})"
                assert next(r for r in own if r[1] == rule.measure)[-1] == caption
        assert any(line.startswith(f"Sensitivity on grid `{grid}`") for line in section)
    matrix = _table_rows(text.split("### Sensitivity: threshold value × grid → outcome")[1].splitlines(), "parameter")
    expected = []
    for claim_id, sweep in FAST["sweep"].items():
        got = {(r["grid"], r["value"]): r["outcome"]
               for r in claims.sensitivity(rows, claim_id, sweep["param"], sweep["values"], FAST)}
        for k, value in enumerate(sweep["values"]):
            judged_mark = " (judged)" if FAST[claim_id][sweep["param"]] == value else ""
            expected.append([claim_id if k == 0 else "", sweep["param"] if k == 0 else "",
                             claims.helpers.fmt(value) + judged_mark, got[("a", value)], got[("g", value)]])
    assert matrix == expected
    assert re.search(r"\| search-cost +\| Contributions .*\*\*HELD\*\*", text)
    assert re.search(r"\| 5\.2 .*\*\*NOT MEASURED\*\*", text)


def test_rendered_rows_keep_their_columns():
    lines = "\n".join(claims.render_claims(shares_grid(), FAST)).splitlines()
    header = next(line for line in lines if line.startswith("| claim "))
    row = next(line for line in lines if line.startswith("| 5.2 "))
    assert "abs" not in row
    assert len(re.findall(r"(?<!\\)\|", row)) == len(re.findall(r"\|", header))


def test_5_3_counts_the_alignment_panel_as_more_points_of_its_condition():
    """Three searchers give too few distinct sets; the rank panel's variants are more points of the same condition."""
    rows = []
    for objective, sign in (("ppl", -1), ("margin", +1)):
        for r in conditions(objective, sign, distinct=7, searchers=SEVEN):
            if r.identity.search in SEVEN[3:]:
                r = r.replace(identity=dataclasses.replace(r.identity, search="rank", variant=f"q{r['removed'][0]}"))
            rows.append(r)
    v = one(claims.CLAIMS["5.3"].verdicts(rows, T))
    assert v.outcome == claims.HELD, v.reason
    w = one(claims.CLAIMS["5.3"].verdicts(rows, claims.with_threshold(T, "5.3", "panel", [])))
    assert w.outcome == claims.NOT_MEASURED and "most distinct: 3" in w.reason


def test_every_claim_is_registered_once_in_the_order_of_claims_toml():
    """The registry holds one claim per family module's decorator, ordered as claims.toml's sections
    (the tables' order); registering a taken id again is refused and leaves the registry as it was."""
    sections = [s for s in claims.load_thresholds() if s not in ("general", "sweep")]  # the file's order
    assert list(claims.CLAIMS) == sections
    for claim in claims.CLAIMS.values():
        assert claim.judge is not None and claim.judge.__module__.startswith("depthprune.report.claims.")
        assert claim.rule(claim.rules[0].measure) == claim.rules[0] and claim.rule("no such measure") is None
    before = dict(claims.CLAIMS)

    def impostor(grid, rows, t, g):
        raise AssertionError("never judged")

    with pytest.raises(ValueError, match="'5.2' is registered twice"):
        claims.register(claims.CLAIMS["5.2"])(impostor)
    assert claims.CLAIMS == before and claims.CLAIMS["5.2"].judge is before["5.2"].judge

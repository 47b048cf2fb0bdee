"""The control sections of REPORT.md: pure functions of results, each finding able to go either way."""

from __future__ import annotations

import pytest

from depthprune.report import controls as C


def res(grid, search, removed, loss, objective="ppl", budget=3, variant="default", cseed=None, acc=0.5,
        trace=None, model="m"):
    cell = f"{model}-{objective}-{search}{'' if variant == 'default' else '.' + variant}-M{budget}"
    if cseed is not None:
        cell += f"-c{cseed}"
    return {"grid": grid, "grid_kind": "controls" if grid == "ctrl" else None,
            "compare_with": "main" if grid == "ctrl" else None, "cell": cell, "model": model,
            "objective": objective, "search": search, "budget": budget, "variant": variant,
            "calibration_seed": cseed or 0, "removed": list(removed), "calibration_loss": loss,
            "metrics": {"avg_acc": acc, "c4_ppl": 10.0 + loss}, "trace": trace or [], "cost": {"evaluations": 1}}


def finding(lines):
    return next(line for line in lines if line.startswith("**Finding.**"))


@pytest.mark.parametrize("data_moves", [True, False])
def test_data_vs_loss_names_whichever_moves_the_sets(data_moves):
    a, b, c = ([1, 2, 3], [7, 8, 9], [7, 8, 9]) if data_moves else ([1, 2, 3], [1, 2, 3], [7, 8, 9])
    main = [res("main", "greedy", a, 1.0), res("main", "greedy", c, 1.0, objective="margin")]
    ctrl = [res("ctrl", "greedy", b, 1.0, variant="csdata")]
    text = finding(C.data_vs_loss(ctrl, main))
    assert ("**data** moves" in text) == data_moves and ("**loss** moves" in text) == (not data_moves)


@pytest.mark.parametrize("uniform_loss, word", [(2.0, "the prior helps"), (0.5, "does not help")])
def test_prior_ablation_counts_worse_and_better(uniform_loss, word):
    main = [res("main", "ga", [1, 2, 3], 1.0)]
    ctrl = [res("ctrl", "ga", [4, 5, 6], uniform_loss, variant="uniform")]
    assert word in finding(C.prior_ablation(ctrl, main))


def test_ground_truth_gap_is_zero_at_the_optimum_and_one_at_chance():
    sample = [[[i, i + 1, i + 2], 3.0] for i in range(5)]  # chance = median 3.0
    ctrl = [res("ctrl", "exhaustive", [0, 1, 2], 1.0), res("ctrl", "random", [0, 1, 3], 2.0, trace=sample)]
    main = [res("main", "oneshot", [0, 1, 2], 1.0), res("main", "greedy", [5, 6, 7], 3.0)]
    lines = C.ground_truth(ctrl, main)
    text = finding(lines)
    assert "oneshot 0.000 (optimal in 1/1)" in text and "greedy 1.000 (optimal in 0/1)" in text


def test_seed_stability_is_one_for_identical_sets_and_the_spread_is_compared():
    main = [res("main", "greedy", [1, 2, 3], 1.0, acc=0.50), res("main", "oneshot", [1, 2, 4], 1.0, acc=0.40)]
    ctrl = [res("ctrl", "greedy", [1, 2, 3], 1.1, cseed=1, acc=0.52),
            res("ctrl", "greedy", [1, 2, 3], 1.2, cseed=2, acc=0.51)]
    text = finding(C.seeds(ctrl, main))
    assert "greedy 1.00" in text and "median 2.0 points" in text and "median 10.0 points" in text


def test_structural_baseline_and_missing_data_say_not_measured():
    main = [res("main", "oneshot", [1, 2, 3], 1.0, acc=0.5)]
    ctrl = [res("ctrl", "bi", [4, 5, 6], 1.5, acc=0.45)]
    assert "worse calibration loss than oneshot's in 1 of 1" in finding(C.structural(ctrl, main))
    for section in (C.structural, C.prior_ablation, C.data_vs_loss, C.seeds, C.ground_truth):
        assert section([], main)[0].startswith("Not measured")


def test_controls_stay_out_of_the_main_tables(tmp_path):
    lines = C.render_controls([res("main", "oneshot", [1, 2, 3], 1.0), res("ctrl", "bi", [4, 5, 6], 1.5)])
    assert any("Controls grid `ctrl`" in line for line in lines)
    assert C.render_controls([res("main", "oneshot", [1, 2, 3], 1.0)]) == []

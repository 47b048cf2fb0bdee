"""The control sections of REPORT.md: pure functions of results, each finding able to go either way."""

from __future__ import annotations

import pytest

from depthprune.report import controls
from depthprune.results.schema import Result
from tests.fixtures import stored_identity


def res(grid, search, removed, loss, objective="ppl", budget=3, variant="default", cseed=None, acc=0.5,
        trace=None, model="m"):
    cell = f"{model}-{objective}-{search}{'' if variant == 'default' else '.' + variant}-M{budget}"
    if cseed is not None:
        cell += f"-c{cseed}"
    ident = stored_identity(grid=grid, model=model, objective=objective, search=search, budget=budget,
                            variant=variant, calibration_seed=cseed or 0, search_seed=0)
    return Result({"identity": ident, "grid_kind": "controls" if grid == "ctrl" else None,
                   "compare_with": "main" if grid == "ctrl" else None, "cell": cell, "n_layers": 16,
                   "removed": list(removed), "calibration_loss": loss,
                   "metrics": {"avg_acc": acc, "c4_ppl": 10.0 + loss}, "trace": trace or [],
                   "cost": {"evaluations": 1, "layer_forwards": 10, "seconds": 1.0}})


def finding(lines):
    return next(line for line in lines if line.startswith("**Finding.**"))


@pytest.mark.parametrize("data_moves", [True, False])
def test_data_vs_loss_names_whichever_moves_the_sets(data_moves):
    a, b, c = ([1, 2, 3], [7, 8, 9], [7, 8, 9]) if data_moves else ([1, 2, 3], [1, 2, 3], [7, 8, 9])
    main = [res("main", "greedy", a, 1.0), res("main", "greedy", c, 1.0, objective="margin")]
    ctrl = [res("ctrl", "greedy", b, 1.0, variant="csdata")]
    text = finding(controls.data_vs_loss(ctrl, main))
    assert ("**data** moves" in text) == data_moves and ("**loss** moves" in text) == (not data_moves)


@pytest.mark.parametrize("uniform_loss, word", [(2.0, "the prior helps"), (0.5, "does not help")])
def test_prior_ablation_counts_worse_and_better(uniform_loss, word):
    main = [res("main", "ga", [1, 2, 3], 1.0)]
    ctrl = [res("ctrl", "ga", [4, 5, 6], uniform_loss, variant="uniform")]
    assert word in finding(controls.prior_ablation(ctrl, main))


def test_ground_truth_gap_is_zero_at_the_optimum_and_one_at_chance():
    sample = [[[i, i + 1, i + 2], 3.0] for i in range(5)]  # chance = median 3.0
    ctrl = [res("ctrl", "exhaustive", [0, 1, 2], 1.0), res("ctrl", "random", [0, 1, 3], 2.0, trace=sample)]
    main = [res("main", "oneshot", [0, 1, 2], 1.0), res("main", "greedy", [5, 6, 7], 3.0)]
    lines = controls.ground_truth(ctrl, main)
    text = finding(lines)
    assert "oneshot 0.000 (optimal in 1/1)" in text and "greedy 1.000 (optimal in 0/1)" in text


def test_seed_stability_is_one_for_identical_sets_and_the_spread_is_compared():
    main = [res("main", "greedy", [1, 2, 3], 1.0, acc=0.50), res("main", "oneshot", [1, 2, 4], 1.0, acc=0.40)]
    ctrl = [res("ctrl", "greedy", [1, 2, 3], 1.1, cseed=1, acc=0.52),
            res("ctrl", "greedy", [1, 2, 3], 1.2, cseed=2, acc=0.51)]
    text = finding(controls.seeds(ctrl, main))
    assert "greedy 1.00" in text and "median 2.0 points" in text and "median 10.0 points" in text


def test_structural_baseline_and_missing_data_say_not_measured():
    main = [res("main", "oneshot", [1, 2, 3], 1.0, acc=0.5)]
    ctrl = [res("ctrl", "bi", [4, 5, 6], 1.5, acc=0.45)]
    assert "worse calibration loss than oneshot's in 1 of 1" in finding(controls.structural(ctrl, main))
    for section in (controls.structural, controls.prior_ablation, controls.data_vs_loss, controls.seeds, controls.ground_truth):
        assert section([], main)[0].startswith("Not measured")


def test_controls_stay_out_of_the_main_tables(tmp_path):
    lines = controls.render_controls([res("main", "oneshot", [1, 2, 3], 1.0), res("ctrl", "bi", [4, 5, 6], 1.5)])
    assert any("Controls grid `ctrl`" in line for line in lines)
    assert controls.render_controls([res("main", "oneshot", [1, 2, 3], 1.0)]) == []


def panel_case(flip: bool, searchers=("oneshot", "greedy", "beam", "ga", "bo")):
    """Searchers: ppl ρ = −1, margin ρ = +1 (by construction); a 12-set panel with the same signs,
    or (flip) the opposite ones, so the panel keeps or reverses the objectives' ordering."""
    main, ctrl = [], []
    for objective, sign in (("ppl", -1), ("margin", 1)):
        for i, search in enumerate(searchers):
            loss = 1.0 + 0.05 * i
            main.append(res("main", search, [i, i + 5, i + 9], loss, objective=objective, acc=0.5 - sign * 0.01 * i))
        panel_sign = -sign if flip else sign
        for k in range(12):
            loss = 0.905 + 0.05 * k  # wider than the searchers' range (1.0-1.2 for five) on both sides
            ctrl.append(res("ctrl", "rank", [k, 13, 14], loss, objective=objective, variant=f"r{k + 1:02d}",
                            acc=0.5 - panel_sign * 0.01 * k))
    return ctrl, main


@pytest.mark.parametrize("flip, word", [(True, "reverses"), (False, "keeps")])
def test_alignment_panel_reports_both_and_whether_the_ordering_survives(flip, word):
    ctrl, main = panel_case(flip)
    lines = controls.alignment_panel(ctrl, main)
    text = finding(lines)
    assert "ppl: searchers -1.00" in text and "margin: searchers +1.00" in text
    assert f"ppl: searchers -1.00, panel {1 if flip else -1:+.2f}" in text and word in text
    table = "\n".join(lines)
    assert "0.9050–1.4550" in table and "1.0000–1.2000" in table  # both loss ranges are stated
    assert "8 of 24 panel sets lie inside" in text
    assert controls.alignment_panel([], main)[0].startswith("Not measured")


@pytest.mark.parametrize("flip, word", [(True, "not the direction"), (False, "the direction claim 5.3 states")])
def test_alignment_panel_alone_when_the_searchers_agree_on_too_few_sets(flip, word):
    ctrl, main = panel_case(flip, searchers=("oneshot", "greedy"))
    lines = controls.alignment_panel(ctrl, main)
    text = finding(lines)
    assert "ppl: searchers –" in text and "No condition's searchers-only ρ" in text and word in text
    assert "2 of 24 panel sets lie inside" in text


def claim_grid(margin_sets):
    """Seven searchers, both objectives, M=3: ppl removes {1,2,3}; margin removes margin_sets[searcher]."""
    rows = []
    for i, search in enumerate(("oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs")):
        rows.append(res("main", search, [1, 2, 3], 1.0 + 0.01 * i, acc=0.5))
        rows.append(res("main", search, margin_sets, 2.0 + 0.01 * i, objective="margin", acc=0.5))
    return rows


@pytest.mark.parametrize("same_sets", [True, False])
def test_claim_verdicts_are_rejudged_on_each_calibration_seed(same_sets):
    main = claim_grid([7, 8, 9])
    reseeded = [7, 8, 9] if same_sets else [1, 2, 3]
    ctrl = [res("ctrl", s, reseeded, 2.0 + 0.01 * i, objective="margin", cseed=c, acc=0.5)
            for i, s in enumerate(("oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs")) for c in (1, 2)]
    lines = controls.claim_seed_spread(ctrl, main)
    row = next(line for line in "\n".join(lines).splitlines() if line.startswith("| 5.1a "))
    assert row.count("**HELD**") == (3 if same_sets else 1), row
    assert finding(lines).startswith("**Finding.** 0 of" if same_sets else "**Finding.** ")
    if not same_sets:
        assert not finding(lines).startswith("**Finding.** 0 of")
    assert controls.claim_seed_spread([], main)[0].startswith("Not measured")


INTERVAL = r"\d+\.\d\s\[\d+\.\d,\s\d+\.\d\]"  # as Interval.points writes an accuracy (\s: no-break spaces too)


def scored(r, seed):
    """``r`` with per-item outcomes on the paper profile's tasks (200 items each) and the avg_acc they give."""
    import numpy as np

    from depthprune.data.profiles import get_profile

    prof, rng = get_profile("paper"), np.random.default_rng(seed)
    outcomes, means = {}, []
    for task in prof.tasks:
        bits = rng.random(200) < 0.4 + 0.3 * rng.random()
        outcomes[task] = {prof.headline_metric(task): "".join("1" if b else "0" for b in bits)}
        means.append(bits.mean())
    return r.replace(item_outcomes=outcomes, metrics={**r["metrics"], "avg_acc": float(np.mean(means))})


def accuracy_cells(lines):
    """Every cell of every table column whose header names an accuracy (not a spread or a difference)."""
    import re

    cells = []
    for block in "\n".join(lines).split("\n\n"):
        rows = [[c.strip() for c in row.strip().strip("|").split("|")] for row in block.splitlines()
                if row.startswith("|")]
        if len(rows) < 3:
            continue
        for k, head in enumerate(rows[0]):
            if re.search(r"\bacc\b", head) and "spread" not in head:
                cells += [row[k] for row in rows[2:]]
    return cells


def test_every_accuracy_a_control_shows_carries_its_interval():
    import re

    main = [scored(res("main", s, sets, loss, objective=o), i) for i, (s, o, sets, loss) in enumerate((
        ("oneshot", "ppl", [1, 2, 3], 1.0), ("greedy", "ppl", [1, 2, 4], 0.9), ("ga", "ppl", [1, 2, 5], 0.95),
        ("greedy", "margin", [7, 8, 9], 1.0), ("ga", "margin", [6, 8, 9], 1.1), ("oneshot", "margin", [5, 8, 9], 1.2)))]
    ctrl = [scored(r, 10 + i) for i, r in enumerate((
        res("ctrl", "bi", [4, 5, 6], 1.5), res("ctrl", "ga", [1, 2, 6], 1.0, variant="uniform"),
        res("ctrl", "greedy", [2, 3, 4], 1.0, variant="csdata"),
        res("ctrl", "greedy", [1, 2, 3], 1.1, cseed=1), res("ctrl", "greedy", [1, 3, 4], 1.2, cseed=2)))]
    for section in (controls.structural, controls.prior_ablation, controls.data_vs_loss, controls.seeds):
        lines = section(ctrl, main)
        cells = accuracy_cells(lines)
        assert cells and all(re.fullmatch(INTERVAL, c) for c in cells), (section.__name__, cells)
        assert all(len(line) <= 160 for text in lines for line in text.splitlines() if line.startswith("|"))
    # the differences on the same items carry their paired interval
    assert re.search(r"[+-]\d+\.\d\s\[[+-]\d+\.\d,\s[+-]\d+\.\d\]", "\n".join(controls.structural(ctrl, main)))


def test_the_seed_verdict_table_is_narrow_and_its_reasons_are_listed_below():
    main = claim_grid([7, 8, 9])
    ctrl = [res("ctrl", s, [1, 2, 3], 2.0 + 0.01 * i, objective="margin", cseed=c, acc=0.5)
            for i, s in enumerate(("oneshot", "greedy", "beam", "ga", "bo", "cbo", "fbs")) for c in (1, 2)]
    lines = controls.claim_seed_spread(ctrl, main)
    text = "\n".join(lines)
    assert all(len(line) <= 160 for line in text.splitlines() if line.startswith("|"))  # prose wraps on writing
    assert "| seed 0 " in text and "| seed 2 " in text  # the seeds side by side, one table
    row = next(line for line in text.splitlines() if line.startswith("| 5.1a "))
    assert "| outcome " in row
    listed = text.split("**Finding.**", 1)[1]
    assert "- **5.1a**:" in listed and "  - seed 1, " in listed  # why it changed, below the table

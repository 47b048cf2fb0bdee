"""The planner counts what runs: its evaluation counts and bounds come from the settings, its
layer-forwards from the searchers' own code through scoring.request_cost.replay_cost, checked here against
forwards actually run on the tiny model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.grid.cases import load_grid
from depthprune.plan import (
    Assumptions,
    NotRecorded,
    RecordedLosses,
    SyntheticLandscape,
    check_result,
    evaluation_bounds,
    forwards_bound,
    makespan,
    model_shape,
    plan_grid,
    simulate,
)
from depthprune.scoring.scorer import Scorer
from depthprune.search import SEARCHERS, get_searcher
from depthprune.search.base import PLANNED, Bounds, Searcher

ROOT = Path(__file__).resolve().parents[2]

BUDGET = 3


@pytest.fixture(scope="module")
def tiny():
    from depthprune.recipe import Session

    session = Session.open("tiny-llama3")
    calib = session.calibrate("ppl", n_samples=4, seq_len=32)
    yield session, calib
    session.close()


@pytest.mark.parametrize("name", ["oneshot", "greedy", "beam"])
def test_planner_counts_what_a_private_scorer_runs(tiny, name):
    """A fresh scorer runs the searcher for real; the planner re-derives the same requests from the
    losses alone and counts the same layer-forwards, and its settings-only counts hold the run."""
    session, calib = tiny
    scorer = Scorer(session.model, calib.scorer.batches, calib.objective, verify=False, cache_bytes=1 << 40,
                    spare_states=False)  # the counted policy: spares shrink a run's work, not its count
    result = get_searcher(name).search(
        n_layers=session.n_layers, budget=BUDGET, score=scorer, seed=0)
    run_forwards = scorer.stats.layer_forwards  # blocks this scorer really ran, the dense pass included
    run_evaluations = scorer.stats.evaluations - 1  # distinct sets, less the dense pass nobody asked for

    planned = simulate(name, {}, session.n_layers, BUDGET, RecordedLosses(dict(scorer.memo)), use_prior=False)
    assert (planned.layer_forwards, planned.evaluations, planned.removed) == (
        run_forwards, run_evaluations, result.removed)

    bounds = evaluation_bounds(name, {}, session.n_layers, BUDGET)
    assert bounds.low <= run_evaluations <= bounds.high
    if name in ("oneshot", "greedy"):  # fixed by the settings
        assert bounds.low == bounds.high == run_evaluations
    assert run_forwards <= forwards_bound(session.n_layers, bounds)


@pytest.mark.parametrize("name", ["oneshot", "greedy", "beam"])
def test_check_result_recounts_a_grid_result(tiny, name, tmp_path):
    """The rehearsal check: a result written by the recipe is re-counted from its recorded losses."""
    from depthprune.recipe import identity, make_result
    from depthprune.results.schema import Result, to_json

    session, calib = tiny
    outcome = calib.search(name, BUDGET, seed=0)
    result = make_result(session, calib, outcome, identity(session, calib, name, BUDGET, 0), cell=f"t-{name}")
    planned, run = check_result(Result.of(result))
    assert (planned.evaluations, planned.layer_forwards, planned.layer_backwards) == (
        run["evaluations"], run["layer_forwards"], run["layer_backwards"])
    assert run["layer_forwards"] == outcome.cost["layer_forwards"]

    # the CLI's check fails on a result whose count was tampered with, and on a broken path
    (tmp_path / "g").mkdir()
    result["cost"]["layer_forwards"] += 1
    (tmp_path / "g" / "t.json").write_text(json.dumps(to_json(result)))
    assert main(["plan", "--check", str(tmp_path)]) == 1
    result["cost"]["layer_forwards"] -= 1
    (tmp_path / "g" / "t.json").write_text(json.dumps(to_json(result)))
    assert main(["plan", "--check", str(tmp_path)]) == 0
    result["trace"] = []  # the sets the search scored are gone: the re-run cannot follow it
    with pytest.raises(NotRecorded):
        check_result(Result.of(result))


def test_the_check_names_what_it_cannot_recount_instead_of_failing(tmp_path, capsys):
    """bi ranks by the dense model's Block Influence, bo fits a GP, cbo reads gate gradients: said, not failed."""
    from depthprune.results.schema import to_json
    from tests.fixtures import result_v2

    (tmp_path / "g").mkdir()
    for search in ("bi", "bo", "cbo"):
        result = result_v2("m", "ppl", search, [1, 2, 3], 2.0)
        (tmp_path / "g" / f"{search}.json").write_text(json.dumps(to_json(result)))
    assert main(["plan", "--check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("not re-counted") == 3 and "Block Influence" in out


SETTINGS = [("oneshot", {}), ("greedy", {}), ("beam", {}), ("beam", {"beam_width": 2}), ("ga", {"max_evaluations": 40}),
            ("cbo", {}), ("fbs", {}), ("fbs", {"candidates": 3, "max_rounds": 2})]


@pytest.mark.parametrize("name, params", SETTINGS)
@pytest.mark.parametrize("n_layers, budget", [(12, 2), (12, 4), (16, 5)])
def test_settings_bounds_hold_on_every_landscape(name, params, n_layers, budget):
    bounds = evaluation_bounds(name, params, n_layers, budget)
    for seed in range(3):
        run = simulate(name, params, n_layers, budget, SyntheticLandscape(n_layers, seed), seed=seed)
        assert bounds.low <= run.evaluations <= bounds.high
        assert run.layer_forwards <= forwards_bound(n_layers, bounds)
        if name in ("oneshot", "greedy", "cbo"):
            assert bounds.low == bounds.high


def test_bo_bounds_hold():
    pytest.importorskip("botorch")
    bounds = evaluation_bounds("bo", {"max_evaluations": 14, "initial_design": 5}, 10, 3)
    run = simulate("bo", {"max_evaluations": 14, "initial_design": 5}, 10, 3, SyntheticLandscape(10, 0))
    assert bounds.low <= run.evaluations <= bounds.high


def test_shape_formula_counts_a_real_model(tiny):
    session, _ = tiny
    assert model_shape("tiny-llama3").params == sum(p.numel() for p in session.model.parameters())


def test_plan_of_the_paper_grid_adds_up(tmp_path):
    grid = load_grid(ROOT / "cases" / "paper.toml")
    plan = plan_grid(grid, Assumptions(gpu="h100-80gb", gpus=8, landscapes=1))
    assert [c.cell for c in plan.cells] == [c.id for c in grid.cells()]
    assert plan.totals["gpu_hours_as_if_alone"] == pytest.approx(sum(c.gpu_hours for c in plan.cells))
    assert plan.totals["gpu_hours_grid_run"] < plan.totals["gpu_hours_as_if_alone"] <= plan.totals["gpu_hours_bound"]
    assert set(plan.tasks["model"]) == set(grid.models)
    assert len(plan.tasks["objective"]) == len(grid.models) * len(grid.objectives)
    assert plan.totals["wall_hours_per_model"] == pytest.approx(makespan(plan.tasks["model"].values(), 8))
    for c in plan.cells:
        assert c.evaluations[0] <= c.evaluations[1]
        assert c.layer_forwards <= c.layer_forwards_bound
        assert c.memory.weights == pytest.approx(plan.shapes[c.model].params * 2 / 2**30)
    # the 2048-token calibration's boundary states outgrow the cache's budget on 80 GB: said in a note
    assert any("prefix cache wants" in n for n in plan.notes)
    # a bigger GPU gives the cache a bigger budget, a faster one fewer hours
    h200 = plan_grid(grid, Assumptions(gpu="h200-141gb", landscapes=1))
    a100 = plan_grid(grid, Assumptions(gpu="a100-80gb", landscapes=1))
    assert h200.cells[0].memory.cache_budget > plan.cells[0].memory.cache_budget
    assert a100.totals["gpu_hours_as_if_alone"] > plan.totals["gpu_hours_as_if_alone"]


def test_makespan_places_longest_first():
    assert makespan([3, 4, 3], 2) == 6  # 4 | 3 + 3
    assert makespan([3, 3, 2, 2, 2], 2) == 7  # a heuristic: 3 + 2 + 2 | 3 + 2, where 6 was possible
    assert makespan([5, 1], 8) == 5
    assert math.isclose(makespan([1.5] * 4, 2), 3.0)


def test_plan_cli(tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main(["plan", "--grid", "tiny", "--cases", str(ROOT / "cases"), "--gpus", "2", "--landscapes", "1",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "assumptions:" in text and "tiny-qwen3-margin-fbs-M5" in text
    data = json.loads(out.read_text())
    assert len(data["cells"]) == len(load_grid(ROOT / "cases" / "tiny.toml").cells())
    assert data["assumption_text"] and data["totals"]["gpu_hours_as_if_alone"] > 0
    for argv, flag in ((["--grid", "tiny", "--gpu", "h900"], "--gpu"), (["--grid", "nope"], "--grid"), ([], "--grid")):
        assert main(["plan", "--cases", str(ROOT / "cases"), *argv]) == 2
        assert flag in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # argparse refuses a type error itself, also with status 2
        main(["plan", "--cases", str(ROOT / "cases"), "--grid", "tiny", "--mfu", "2"])
    assert exit_.value.code == 2 and "--mfu" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_every_searcher_owns_its_planning_rule(name):
    """Each searcher's cost rule lives in its own file (Searcher.evaluation_bounds); planning only asks it."""
    searcher = get_searcher(name)
    assert type(searcher).evaluation_bounds is not Searcher.evaluation_bounds, f"{name}: no planning rule"
    bounds = searcher.evaluation_bounds(12, 3)
    assert 0 < bounds.low <= bounds.high and bounds == evaluation_bounds(name, {}, 12, 3)
    assert type(searcher).planned in PLANNED, f"{name}: planned {type(searcher).planned!r} is none of {PLANNED}"


def test_the_planner_counts_a_searcher_the_way_it_declares(monkeypatch):
    """plan reads Searcher.planned, never a searcher's name: greedy declared "fixed" is planned as bi is."""
    from depthprune.plan import plan_grid

    grid = load_grid(ROOT / "cases" / "tiny.toml")

    def bases() -> set[str]:
        return {c.basis for c in plan_grid(grid, Assumptions(landscapes=1)).cells if c.search == "greedy"}

    assert SEARCHERS["bo"].planned == "bound" and SEARCHERS["bi"].planned == "fixed"
    assert "fixed (no loss search)" not in bases()
    monkeypatch.setattr(SEARCHERS["greedy"], "planned", "fixed")
    assert bases() == {"fixed (no loss search)"}


def test_rank_plans_its_sample_not_every_set():
    """The real grid's rank panel ranks a sample of 512 of C(30, 7) = 2,035,800 sets."""
    assert evaluation_bounds("rank", {"sample": 512}, 30, 7) == Bounds(512, 512, {7: 512})
    assert evaluation_bounds("rank", {}, 12, 4).low == evaluation_bounds("exhaustive", {}, 12, 4).high == 495
    assert Bounds(3, 3, {}).exact and not Bounds(3, 4, {}).exact


def test_a_searcher_without_a_planning_rule_is_named():
    with pytest.raises(NotImplementedError, match="no planning rule"):
        Searcher.evaluation_bounds(get_searcher("oneshot"), 12, 3)


def test_the_real_grid_is_planned_with_its_cells_blocks_and_variants():
    """Its [[cells]] block adds gemma3-270m, and its rank panel's variants sample 512 sets: planning once
    failed on the first (KeyError) and, on the second, would have counted every one of C(30, 7) sets."""
    from depthprune.plan import plan_grid

    grid = load_grid(Path(__file__).resolve().parents[2] / "cases" / "real.toml")
    plan = plan_grid(grid, Assumptions(landscapes=1))
    cells = {c.cell: c for c in plan.cells}
    assert {c.model for c in plan.cells} == {"smollm2-135m", "gemma3-270m"}
    assert cells["smollm2-135m-ppl-rank.p00-M7"].evaluations == (512, 512)


def test_healing_is_counted_apart_at_the_peers_budget_and_scales_with_it():
    grid = load_grid(ROOT / "cases" / "paper.toml")
    peers = plan_grid(grid, Assumptions(landscapes=1))
    half = plan_grid(grid, Assumptions(landscapes=1, heal_tokens=peers.totals["heal_tokens"] // 2))
    assert peers.totals["heal_tokens"] == 19_000_000
    assert peers.totals["gpu_hours_heal"] == pytest.approx(sum(peers.totals["gpu_hours_heal_per_model"].values()))
    assert half.totals["gpu_hours_heal"] == pytest.approx(peers.totals["gpu_hours_heal"] / 2, rel=1e-6)
    assert half.totals["gpu_hours_grid_run"] == peers.totals["gpu_hours_grid_run"]  # the grid's own hours unchanged
    # a heal of an 8B model over 19 M tokens: 6 x 8e9 x 19e6 FLOP ~ 0.5 GPU-hour at 35% of an H100; ~87 heals
    assert 20 < peers.totals["gpu_hours_heal"] < 100

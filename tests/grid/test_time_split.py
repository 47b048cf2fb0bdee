"""depthprune time-split: phases, per-searcher seconds and repeats, from results alone."""

from __future__ import annotations

from depthprune.grid.time_split import per_phase, per_searcher, repeats
from depthprune.results.schema import Result
from tests.fixtures import stored_identity


def _result(search, trace, removed, *, shared_sets=0, shared=0.0, search_s=10.0, eval_s=5.0, cached=False,
            model="m", prior=False):
    return Result({"identity": stored_identity(model=model, objective="ppl", search=search),
                   "objective_params": {"n": 1},
            "n_layers": 4, "trace": [[sorted(s), 1.0] for s in trace], "removed": removed,
            "search_info": {"used_given_prior": prior},
            "cost": {"search_seconds": search_s, "shared_seconds": shared, "shared_sets": shared_sets,
                     "eval_seconds": eval_s, "eval_cached": cached, "dense_seconds": 1.0, "prior_seconds": 0.0}})


def test_repeats_split_shared_ones_from_ones_computed_twice():
    a = _result("greedy", [{0}, {1}, {0, 1}, {0, 2}], [0, 1])
    b = _result("beam", [{0}, {1}, {0, 1}, {1, 2}], [0, 1], shared_sets=1, shared=2.0, cached=True)  # {0,1} shared
    c = _result("ga", [{0, 2}, {2, 3}], [2, 3])  # {0,2} again, not shared: computed twice
    rows = {r["what"]: r for r in repeats([a, b, c])}
    sets, evals = rows["scored sets: m ppl"], rows["evaluations: m"]
    assert (sets["asked"], sets["distinct"], sets["repeats"], sets["computed twice"]) == (10, 6, 4, 1)
    assert (evals["asked"], evals["distinct"], evals["repeats"], evals["computed twice"]) == (3, 2, 1, 0)
    by = {r["searcher"]: r for r in per_searcher([a, b, c])}
    assert by["beam"]["search s (here)"] == 8.0 and by["beam"]["search s (shared)"] == 2.0
    assert by["beam"]["evaluation s"] == 0 and by["greedy"]["evaluation s"] == 5.0


def test_phases_leave_the_rest_of_wall_times_workers_as_other():
    a = _result("greedy", [{0}], [0])
    dense = [{"load_seconds": 2.0, "eval_seconds": 3.0, "objectives": {"ppl": {"dense_seconds": 1.0,
                                                                             "prior_seconds": 4.0,
                                                                             "prior_seconds_here": 0.5}}}]
    rows = {r["phase"]: r for r in per_phase([a], dense, None, wall_seconds=20.0, workers=2)}
    assert rows["prior (singles)"]["seconds"] == 0.5 and rows["dense evaluation"]["seconds"] == 3.0
    other = [r for name, r in rows.items() if name.startswith("other")][0]
    assert other["seconds"] == 40.0 - (10.0 + 5.0 + 2.0 + 1.0 + 0.5 + 3.0)


def test_an_energy_computed_by_two_cells_of_a_condition_is_counted_twice():
    passes = 4 + 5 * 4  # depthprune.scoring.gates.energy_passes(4): forwards
    cells = [_result("cbo", [{0, 1}], [0, 1]), _result("cbo", [{0, 1, 2}], [0, 1, 2])]
    for cell, here in zip(cells, (passes + 2, passes + 3)):
        cell["cost"].update(layer_backwards=20, layer_forwards_here=here)
    row = {r["what"]: r for r in repeats(cells)}["gate-gradient energy: m ppl"]
    assert (row["asked"], row["repeats"], row["computed twice"]) == (2, 1, 1)
    cells[1]["cost"]["layer_forwards_here"] = 3  # given the first one's energy: its own sets only
    assert {r["what"]: r for r in repeats(cells)}["gate-gradient energy: m ppl"]["computed twice"] == 0

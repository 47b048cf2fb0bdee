"""Following a turned decision (depthprune.verify.rivals) without a model: the followed search is the
searcher run on the recorded losses with the decision's two sides swapped, and only sets the cell never
scored are computed."""

from __future__ import annotations

import pytest

from depthprune.cli import main
from depthprune.results.schema import Result
from depthprune.search import get_searcher
from depthprune.verify.firmness import decision_key, read_rivals
from depthprune.verify.replay import replay
from depthprune.verify.rivals import TurnedScore, follow
from tests.fixtures import stored_identity

W = [0.10, 0.11, 0.5, 0.6, 0.7, 0.8]


def loss(s: frozenset[int]) -> float:
    """Additive, except that removing 0 and 1 together costs much: greedy's first step decides the pair."""
    return sum(W[i] for i in s) + (5.0 if {0, 1} <= s else 0.0)


def greedy_result() -> Result:
    found = get_searcher("greedy").search(n_layers=6, budget=2, score=loss, seed=0, protected=frozenset(),
                                          prior=None)
    return Result({"cell": "c", "search_params": found.params, "n_layers": 6,
            "removed": sorted(found.removed), "calibration_loss": found.loss, "trace": [[sorted(s), v] for s, v in
                                                                                         found.trace],
            "prior": None, "settings": {}, "identity": stored_identity(search="greedy", search_seed=0),
            "cost": {"search_evaluations": found.evaluations}})


def test_a_turned_first_step_takes_the_other_path():
    result = greedy_result()
    assert result["removed"] == [0, 2]
    first = next(d for d in replay(result).decisions if d.kind == "step")
    assert (first.chosen, first.rival) == ((0,), (1,))
    computed = []
    removed, value, n = follow(result, first, lambda s: computed.append(s) or loss(s))
    swapped = {frozenset([0]): loss(frozenset([1])), frozenset([1]): loss(frozenset([0]))}
    expected = get_searcher("greedy").search(n_layers=6, budget=2, score=lambda s: swapped.get(frozenset(s), loss(s)),
                                             seed=0, protected=frozenset(), prior=None)
    assert removed == sorted(expected.removed) == [1, 2] and value == pytest.approx(expected.loss)
    recorded = {frozenset(s) for s, _ in result["trace"]}
    assert n == len(computed) > 0 and not any(s in recorded for s in computed)  # only what the cell never scored


def test_the_turned_decisions_sides_swap_and_nothing_else_moves():
    score = TurnedScore({frozenset([0]): 1.0, frozenset([1]): 2.0, frozenset([2]): 3.0},
                        (frozenset([0]), frozenset([1])), lambda s: 9.0, {})
    assert score.many([[0], [1], [2], [3]]) == [2.0, 1.0, 3.0, 9.0] and score.computed == [frozenset([3])]


def test_a_rivals_file_of_another_format_is_refused(tmp_path):
    bad = tmp_path / "rivals-tiny.json"
    bad.write_text('{"schema": "something-else/9", "rivals": []}')
    with pytest.raises(ValueError, match="something-else/9"):
        read_rivals([bad])
    assert read_rivals([tmp_path / "absent.json"]) == {}
    assert decision_key(replay(greedy_result()).decisions[0]).startswith("step@")


def test_measure_rivals_refuses_a_grid_that_is_not_there(capsys):
    assert main(["measure", "rivals", "--grid", "no-such-grid"]) == 2
    assert "no-such-grid" in capsys.readouterr().err

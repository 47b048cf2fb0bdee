"""Cost as if the searcher ran alone: the replayed count is what a private scorer really runs,
whatever a shared memo held, and it is charged the prior only when the searcher uses it."""

from __future__ import annotations

import pytest
import torch

from depthprune.objectives.base import Batch
from depthprune.objectives.ppl import PerplexityObjective
from depthprune.scoring.scorer import Scorer, replay_cost
from depthprune.search import get_searcher
from tests.fixtures import random_model

N_LAYERS = 8


def _scorer(**kw):
    g = torch.Generator().manual_seed(0)
    batches = [Batch(torch.randint(4, 30, (3, 24), generator=g)) for _ in range(2)]
    # the counted policy: the keep-best states only (spares make this process's work smaller, not the count)
    return Scorer(random_model("llama", n_layers=N_LAYERS), batches, PerplexityObjective(), spare_states=False, **kw)


@pytest.mark.parametrize("name, params", [("greedy", {}), ("beam", {"beam_width": 2}), ("ga", {"max_evaluations": 20}),
                                          ("fbs", {}), ("oneshot", {})])
def test_replay_equals_what_a_private_scorer_runs(name, params):
    """A fresh scorer with nothing shared: the replayed count must equal its own counter."""
    alone = _scorer(verify=False)
    dense_forwards = alone.stats.layer_forwards
    assert dense_forwards == N_LAYERS
    result = get_searcher(name, **params).search(n_layers=N_LAYERS, budget=3, score=alone, seed=0)
    replay = replay_cost(alone.requests, alone.memo, N_LAYERS)
    assert replay.layer_forwards == alone.stats.layer_forwards
    assert replay.evaluations == result.evaluations  # distinct sets the searcher asked for
    assert alone.stats.evaluations == result.evaluations + (frozenset() not in alone.requests)  # + the dense pass


def test_a_shared_memo_does_not_make_a_search_cheaper():
    """On a fork with the prior pre-filled, the fork runs less than alone, the replay does not."""
    base = _scorer(verify=False)
    prior = [base(frozenset([i])) for i in range(N_LAYERS)]
    fork = base.fork(known={frozenset([i]): loss for i, loss in enumerate(prior)})
    get_searcher("greedy").search(n_layers=N_LAYERS, budget=3, score=fork, seed=0, prior=prior)
    alone = _scorer(verify=False)
    get_searcher("greedy").search(n_layers=N_LAYERS, budget=3, score=alone, seed=0)
    replay = replay_cost(fork.requests, {**fork.memo}, N_LAYERS)
    assert fork.stats.layer_forwards < alone.stats.layer_forwards
    assert replay.layer_forwards == alone.stats.layer_forwards


def test_energy_passes_are_counted_once_and_the_cache_can_be_off():
    s = _scorer(verify=False)
    s.energy()
    s.energy()
    replay = replay_cost(s.requests, s.memo, N_LAYERS)
    assert replay.layer_forwards == s.stats.layer_forwards and replay.layer_backwards == s.stats.layer_backwards > 0
    off = _scorer(verify=False, prefix_cache=False)
    get_searcher("greedy").search(n_layers=N_LAYERS, budget=2, score=off, seed=0)
    assert replay_cost(off.requests, off.memo, N_LAYERS, prefix_cache=False).layer_forwards == off.stats.layer_forwards


def test_recipe_charges_the_prior_only_to_searchers_that_use_it(tmp_path):
    from depthprune.recipe import Session

    session = Session.open("tiny-llama3")
    calib = session.calibrate("ppl", n_samples=4, seq_len=32)
    oneshot = calib.search("oneshot", 2)
    greedy = calib.search("greedy", 2)
    assert oneshot.result.info["used_given_prior"] and not greedy.result.info["used_given_prior"]
    assert oneshot.cost["prior_evaluations"] == 16 and oneshot.cost["evaluations"] == 17
    assert greedy.cost["prior_evaluations"] == 0 and greedy.cost["evaluations"] == 16 + 15
    # the same searcher twice on one session costs the same: nothing carried over between forks
    again = calib.search("greedy", 2).cost
    counts = ("evaluations", "layer_forwards", "layer_backwards", "prior_evaluations", "search_evaluations")
    assert {k: again[k] for k in counts} == {k: greedy.cost[k] for k in counts}


# A condition's memo (greedy M3 re-uses greedy M2's path, beam re-uses greedy's sets) and its store on disk:
# tests/scoring/test_score_store.py::test_a_warm_store_changes_what_runs_not_the_results_or_their_count checks both
# against searches with nothing shared.

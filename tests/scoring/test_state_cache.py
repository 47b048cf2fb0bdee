"""The prefix cache's spares: other sets' states kept while the budget has room, dropped first.

Spares change how much this process computes, never a loss, a removed set or a counted cost.
"""

from __future__ import annotations

import pytest
import torch

from depthprune.objectives.base import Batch
from depthprune.objectives.ppl import PerplexityObjective
from depthprune.scoring.scorer import Scorer, replay_cost
from depthprune.scoring.state_cache import StateCache, boundary_key
from depthprune.search import get_searcher
from tests.fixtures import random_model


def _state() -> list[torch.Tensor]:
    return [torch.zeros(1, dtype=torch.uint8)]  # one byte: budgets below count states


def _offer(cache: StateCache, owner: set[int], loss: float, boundaries: list[int]) -> list[tuple]:
    keys = [boundary_key(b, owner) for b in boundaries]
    cache.offer(frozenset(owner), loss, {k: _state() for k in keys})
    return keys


def test_without_spares_only_the_best_of_each_size_are_kept():
    cache = StateCache(max_bytes=100, keep_best=1)
    dense = _offer(cache, set(), 0.0, [1, 2])
    best = _offer(cache, {0}, 1.0, [3])
    worse = _offer(cache, {1}, 2.0, [4])
    assert set(cache.entries) == {*dense, *best} and not cache.spares and worse[0] not in cache.entries


def test_spares_are_dropped_first_least_recently_used_first():
    cache = StateCache(max_bytes=5, keep_best=1, spare=True)
    dense = _offer(cache, set(), 0.0, [1, 2])
    best = _offer(cache, {0}, 1.0, [3])
    b = _offer(cache, {1}, 2.0, [4])
    d = _offer(cache, {2}, 3.0, [5])
    assert list(cache.spares) == [*b, *d] and cache.bytes == 5
    e = _offer(cache, {3}, 4.0, [6])  # over budget: the least recently used spare goes, b's
    assert set(cache.entries) == {*dense, *best, *d, *e} and cache.bytes == 5
    assert cache.deepest(frozenset({2, 7}), 8)[0] == 5  # resumes from d's spare, which is now the most recent
    f = _offer(cache, {4}, 5.0, [7])  # so e's goes
    assert set(cache.entries) == {*dense, *best, *d, *f} and cache.bytes == 5


def test_a_set_that_leaves_the_best_becomes_a_spare_and_a_kept_set_takes_over_a_spares_state():
    cache = StateCache(max_bytes=100, keep_best=1, spare=True)
    first = _offer(cache, {3}, 2.0, [4, 5])
    assert not cache.spares
    _offer(cache, {5}, 1.0, [6])  # better: {3} leaves the best of size 1
    assert list(cache.spares) == first
    shared = boundary_key(4, {3})
    cache.offer(frozenset({3, 6}), 0.5, {shared: _state()})  # a kept set of size 2 passes the same boundary
    assert shared not in cache.spares and cache.entries[shared].owner == frozenset({3, 6})
    assert cache.entries[shared].states is not None and cache.bytes == 3


def test_lend_makes_room_by_dropping_spares_only():
    cache = StateCache(max_bytes=3, keep_best=1, spare=True)
    dense = _offer(cache, set(), 0.0, [1])
    _offer(cache, {0}, 1.0, [2])
    _offer(cache, {1}, 2.0, [3])
    assert cache.lend((9, frozenset({1, 2})), _state())
    assert not cache.spares and dense[0] in cache.entries
    assert not cache.lend((9, frozenset({4})), _state())  # only kept states left: no room


def test_drop_spares_keeps_the_kept_states():
    cache = StateCache(max_bytes=100, keep_best=1, spare=True)
    dense = _offer(cache, set(), 0.0, [1])
    best = _offer(cache, {0}, 1.0, [2])
    _offer(cache, {1}, 2.0, [3])
    cache.drop_spares()
    assert set(cache.entries) == {*dense, *best} and cache.bytes == 2


@pytest.mark.parametrize("searcher", ["ga", "beam", "greedy"])
def test_spares_change_the_work_not_the_losses_nor_the_counted_cost(searcher):
    model = random_model("llama", n_layers=8)
    batches = [Batch(torch.randint(4, 30, (2, 12), generator=torch.Generator().manual_seed(0)))]
    params = {"max_evaluations": 40} if searcher == "ga" else {}
    runs = {}
    for spare in (False, True):
        scorer = Scorer(model, batches, PerplexityObjective(), spare_states=spare)
        result = get_searcher(searcher, **params).search(n_layers=8, budget=3, score=scorer, seed=0)
        counted = replay_cost(scorer.requests, scorer.memo, 8, scorer.cache.keep_best)
        runs[spare] = (result.removed, result.loss.hex(), {s: v.hex() for s, v in scorer.memo.items()}, counted,
                       scorer.stats.layer_forwards)
    assert runs[True][:4] == runs[False][:4]
    assert runs[True][4] < runs[False][4], (runs[True][4], runs[False][4])


def test_a_condition_s_next_search_resumes_from_the_states_its_last_one_left():
    """A calibration's fork takes over its last search's cache (restarted: its sets' states are spares):
    greedy to 3 after greedy to 2 runs only its new step's blocks from the deepest states, with the same
    result and counted cost as on a fresh cache. Another condition's search takes the warm cache away."""
    from depthprune.recipe import Session

    session = Session.open("tiny-llama3")
    calib = session.calibrate("ppl", n_samples=2, seq_len=16)
    runs = {}
    for warm in (False, True):
        calib.memo = {s: v for s, v in calib.memo.items() if len(s) <= 1}  # the prior only
        calib.warm = None
        calib.search("greedy", 2)
        if not warm:
            calib.warm = None
        out = calib.search("greedy", 3)
        runs[warm] = (out.removed, out.result.loss.hex(), out.result.trace,
                      {k: out.cost[k] for k in ("evaluations", "layer_forwards")}, out.cost["layer_forwards_here"])
    assert runs[True][:4] == runs[False][:4]
    assert runs[True][4] < runs[False][4], (runs[True][4], runs[False][4])
    assert calib.warm is not None
    session.calibrate("ppl", n_samples=2, seq_len=12).search("oneshot", 2)
    assert calib.warm is None
    with pytest.raises(ValueError, match="another scorer"):
        session.calibrate("ppl", n_samples=2, seq_len=12).scorer.fork(reuse=calib.scorer.fork())

"""The healing curve's rule, on gaps made up to sit on each side of it: the budget is the first doubling that
recovers less than 10% of the gap left once the returns diminish, a heal that reaches the dense model stops it,
and the cap bounds it."""

from __future__ import annotations

from depthprune.experiments.healing_curve import cap_tokens, choose_budget, curve_sets
from depthprune.results.schema import validate
from tests.fixtures import result_v2


def test_the_budget_is_the_first_doubling_that_recovers_under_a_tenth_of_the_gap_left_as_returns_diminish():
    gaps = {4096: 1.0, 8192: 0.6, 16384: 0.4, 32768: 0.37, 65536: 0.36}
    assert choose_budget(gaps, cap=65536)[0] == 16384  # 40%, 33%, then 0.4 -> 0.37 recovers 7.5% < 10%
    assert choose_budget({**gaps, 32768: 0.35}, cap=65536)[0] == 32768  # 12.5% at 16384; 0.35 -> 0.36 at 32768
    assert choose_budget({4096: 1.0, 8192: 0.5, 16384: 0.25}, cap=16384) == (
        16384, "no doubling below the cap 16384 recovered less than 10% of the gap left with the returns "
               "diminishing: the cap")
    assert choose_budget({4096: 0.5, 8192: -0.01, 16384: -0.02}, cap=16384)[0] == 8192
    assert choose_budget(gaps, cap=8192)[0] == 8192  # the points past the cap are not read


def test_a_curve_whose_returns_still_grow_is_not_cut_where_it_starts():
    # the tiny curve of record (archive/healing-curve-tiny.json): each doubling recovers 0.8%, 1.7%, 3.4%, 7.7%
    rising = {4096: 0.390, 8192: 0.387, 16384: 0.380, 32768: 0.367, 65536: 0.339}
    assert choose_budget(rising, cap=65536)[0] == 65536
    # the first point has no doubling before it to show diminishing returns: it never ends the curve alone
    assert choose_budget({4096: 1.0, 8192: 0.99, 16384: 0.5}, cap=16384)[0] == 16384
    # once the returns fall, a share under 10% ends it
    assert choose_budget({**rising, 65536: 0.35, 131072: 0.349}, cap=131072)[0] == 65536


def test_the_cap_is_the_largest_doubling_whose_heals_fit_the_limit():
    # 10 jobs, 1000 tokens/s, 5 s per evaluation: T fits when 10 * (T/1000 + 10) <= limit
    assert cap_tokens(10, 1000.0, 5.0, limit_s=10 * (8192 / 1000 + 10)) == 8192
    assert cap_tokens(10, 1000.0, 5.0, limit_s=10 * (8191 / 1000 + 10)) == 4096
    assert cap_tokens(10, 1000.0, 5.0, limit_s=1.0) == 4096  # the start, even where nothing fits


def test_the_curve_heals_the_one_shot_sets_of_the_largest_budget_under_both_objectives():
    rows = [validate(result_v2("m", obj, search, removed, 1.0, budget=b, grid="g"), "made")
            for obj, search, removed, b in [("ppl", "oneshot", [1, 2], 2), ("margin", "oneshot", [3, 4], 2),
                                            ("ppl", "oneshot", [1], 1), ("ppl", "greedy", [5, 6], 2),
                                            ("margin", "oneshot", [1, 2], 2)]]
    assert curve_sets(rows, "g") == {"m": [(1, 2), (3, 4)]}

"""Longest-first ordering of grid cell groups: only the order changes, groups stay together."""

from __future__ import annotations

import heapq
import json

import pytest

from depthprune.grid.cases import Cell
from depthprune.grid.schedule import durations_from_results, estimate, load_durations, longest_first


def test_groups_stay_together_and_the_heaviest_goes_first():
    items = ["setup", "a1", "a2", "b1", "c1", "c2", "tail"]
    group = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}
    seconds = {1: 1.0, 2: 1.0, 3: 5.0, 4: 2.0, 5: 2.5}
    assert longest_first(items, group, seconds) == ["setup", "b1", "c1", "c2", "a1", "a2", "tail"]
    assert longest_first(items, {}, {}) == items


def makespan(loads_in_order, workers=2):
    """Workers take the next group as they free up (what --dist loadgroup does)."""
    loads = [0.0] * workers
    for t in loads_in_order:
        heapq.heappush(loads, heapq.heappop(loads) + t)
    return max(loads)


def test_longest_first_beats_collection_order_when_a_heavy_group_comes_last():
    sizes = {"a": 2.0, "b": 2.0, "c": 4.0}  # collection order a, b, c: makespan 6; longest first: 4
    items = list(sizes)
    order = longest_first(items, dict(enumerate(items)), {i: sizes[g] for i, g in enumerate(items)})
    assert makespan([sizes[g] for g in items]) == 6.0 and makespan([sizes[g] for g in order]) == 4.0


def test_estimates_fall_back_to_the_searchers_median_then_the_overall_one():
    cells = [Cell("g", "m", "ppl", s, b) for s in ("greedy", "ga", "rank") for b in (3, 5)]
    recorded = {"m-ppl-greedy-M3": 10.0, "m-ppl-greedy-M5": 30.0, "m-ppl-ga-M3": 100.0}
    est = estimate(cells, recorded)
    assert est["m-ppl-ga-M5"] == 100.0 and est["m-ppl-greedy-M3"] == 10.0
    assert est["m-ppl-rank-M3"] == 30.0  # median of 10, 30, 100
    assert set(estimate(cells, {}).values()) == {1.0}


def test_durations_come_from_results_and_a_bad_file_is_named(tmp_path):
    r = {"cell": "x", "cost": {"seconds": 12.0, "shared_seconds": 2.0, "dense_seconds": 1.0, "eval_seconds": 5.0}}
    assert durations_from_results([r]) == {"x": 14.0}
    assert load_durations("nothing", tmp_path) == {}
    (tmp_path / "durations").mkdir()
    (tmp_path / "durations" / "g.json").write_text(json.dumps({"cells": {}}))
    with pytest.raises(ValueError, match="g.json"):
        load_durations("g", tmp_path)

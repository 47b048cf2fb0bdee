"""Benchmark: searches with the prefix cache's spares against the kept-best states only.

Both run in this process on one loaded model and one calibration, interleaved, each search on a
fresh fork with no shared memo (``share_memo=False``): the searcher's whole work, as a private
scorer runs it. Asserted: the same removed sets, losses (bits) and traces, the same counted cost,
and fewer layer-forwards run with spares (counts: deterministic). The wall-time ratio is reported
(extra_info and stdout), never asserted. The test suite runs it once on a small ppl calibration
(``--benchmark-disable``); measure on tiny-llama3's margin calibration with
``pytest bench/test_bench_spares.py --benchmark-enable -s -n 0``.
"""

from __future__ import annotations

import time

import pytest

from depthprune.recipe import Calibration, Session

SEARCHES = (("ga", 5), ("beam", 5), ("greedy", 5), ("bo", 5))


@pytest.fixture(scope="module")
def session():
    return Session.open("tiny-llama3")


def _search(calib: Calibration, name: str, budget: int, spare: bool) -> tuple[tuple, dict, int, float]:
    calib.scorer.cache.spare = spare  # forks take the parent's policy
    start = time.perf_counter()
    out = calib.search(name, budget, share_memo=False)
    seconds = time.perf_counter() - start
    same = (out.removed, out.result.loss.hex(), repr(out.result.trace))
    counted = {k: out.cost[k] for k in ("evaluations", "layer_forwards", "layer_backwards")}
    return same, counted, int(out.cost["layer_forwards_here"]), seconds


def test_spares_against_kept_best_only(benchmark, session):
    if benchmark.disabled:  # a test run: answers and counts on a small calibration, no timing
        calib = session.calibrate("ppl", n_samples=2, seq_len=16)
        searches: tuple[tuple[str, int], ...] = (("ga", 3), ("beam", 3))
    else:
        calib = session.calibrate("margin")
        searches = SEARCHES
    rows = {}
    for i, (name, budget) in enumerate(searches):
        off = _search(calib, name, budget, spare=False)
        if i == 0:  # the benchmark's own timing: the first search with spares
            on = benchmark.pedantic(_search, args=(calib, name, budget, True), rounds=1, iterations=1)
        else:
            on = _search(calib, name, budget, spare=True)
        assert on[:2] == off[:2], f"{name}: spares changed a removed set, loss, trace or counted cost"
        assert on[2] < off[2], f"{name}: spares ran {on[2]} layer-forwards, without {off[2]}"
        rows[name] = {"layer_forwards_spares": on[2], "layer_forwards_kept_best": off[2],
                      "blocks_ratio": round(on[2] / off[2], 4), "wall_ratio": round(on[3] / off[3], 4)}
    calib.scorer.cache.spare = True
    benchmark.extra_info.update(rows)
    for name, row in rows.items():
        print(f"\n{name}: with spares / kept best only: layer-forwards {row['layer_forwards_spares']}/"
              f"{row['layer_forwards_kept_best']} = {row['blocks_ratio']:.3f}, wall time ratio {row['wall_ratio']:.3f}")

"""Benchmark: one condition's searches with the score store off, and over a store a previous run filled.

Both run in this process, on one loaded model and the same calibration: "off" is what a process
without the store computes (``DEPTHPRUNE_SCORE_STORE=off``: only the in-process memo of the
condition is shared), "warm" is a new calibration over the store a first pass filled (what
another worker, a later run or a run resumed after kill -9 finds). Asserted: the same removed
sets, losses and traces, and no set computed on the warm side (counts, deterministic). The
wall-time ratio is reported (extra_info and stdout), never asserted. The test suite runs it once
(``--benchmark-disable``); measure with
``pytest bench/test_bench_score_store.py --benchmark-enable -s -n 0``.
"""

from __future__ import annotations

import time

import pytest

from depthprune.objectives import make_objective
from depthprune.recipe import Calibration, Session
from depthprune.scoring.score_store import store_enabled

LANE = (("greedy", 2, {}), ("greedy", 3, {}), ("beam", 2, {"beam_width": 2}))


@pytest.fixture(scope="module")
def session():
    return Session.open("tiny-llama3")


def _lane(session: Session, store_path) -> tuple[list, float, int]:
    start = time.perf_counter()
    session.store_path = store_path
    calib = Calibration.build(session, make_objective("ppl", session.profile, n_samples=2, seq_len=16))
    outcomes = [calib.search(name, budget, params=params) for name, budget, params in LANE]
    here = sum(o.cost["layer_forwards_here"] for o in outcomes)
    return [(o.removed, o.result.loss, o.result.trace) for o in outcomes], time.perf_counter() - start, here


def test_score_store_warm_against_off(benchmark, session, tmp_path, monkeypatch):
    monkeypatch.setenv("DEPTHPRUNE_SCORE_STORE", "on")
    assert store_enabled()
    store = tmp_path / "score-store.sqlite"
    _lane(session, store)  # the first run, filling the store
    off, off_seconds, off_here = _lane(session, None)
    warm, warm_seconds, warm_here = benchmark.pedantic(lambda: _lane(session, store), rounds=1, iterations=1)
    assert warm == off, "the store changed a removed set, loss or trace"
    assert off_here > 0 and warm_here == 0
    ratio = warm_seconds / off_seconds
    benchmark.extra_info.update({"off_seconds": off_seconds, "warm_seconds": warm_seconds, "warm_over_off": ratio,
                                 "layer_forwards_off": off_here, "layer_forwards_warm": warm_here})
    print(f"\nscore store: a condition's lane over a warm store took {ratio:.3f}x the time with the store off "
          f"(layer-forwards run: {warm_here} against {off_here})")

"""Benchmark: what pruning buys in speed, the dense and the rebuilt pruned model timed in one process.

For each model the suite runs, the removed set of its greedy ``ppl`` cell (the committed reference)
is deleted from a copy of the model (:func:`depthprune.speed.compare.rebuild`), and both are timed
in alternating rounds (:func:`depthprune.speed.compare.time_pair`) on a prefill at the model's long
context and a KV-cached decode. Reported in the benchmark's extra_info and on stdout: the measured
speedup (median of the rounds' ratios, min-max), the blocks-only prediction L/(L-M) and the shipped
cost table's; never asserted, since they are the machine's. The test suite runs it once on one tiny
model at a few tokens (``--benchmark-disable`` is in the default options) and checks only the
machinery; measure with ``pytest bench/test_bench_speed.py --benchmark-enable -s``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from depthprune.model import WeightsUnavailable, load_model
from depthprune.speed import costs
from depthprune.speed.compare import rebuild, time_pair
from depthprune.speed.timing import Workload

ROOT = Path(__file__).resolve().parent.parent
#: model -> the reference whose removed set is timed (greedy under ppl; the M the grid runs first)
SUBJECTS = {
    "tiny-llama3": "reference/float32/tiny-llama3-ppl-greedy-M3.json",
    "tiny-qwen3": "reference/float32/tiny-qwen3-ppl-greedy-M3.json",
    "tiny-llama3.1": "reference/float32/tiny-llama3.1-ppl-greedy-M3.json",
    "smollm2-135m": "reference/bfloat16/smollm2-135m-ppl-greedy-M7.json",
    "gemma3-270m": "reference/bfloat16/gemma3-270m-ppl-greedy-M4.json",
}


@pytest.mark.parametrize("model_id", list(SUBJECTS))
def test_speedup_against_predictions(benchmark, model_id):
    if benchmark.disabled and model_id != "tiny-llama3":
        pytest.skip("a test run checks the machinery on one tiny model")
    removed = tuple(json.loads((ROOT / SUBJECTS[model_id]).read_text())["removed"])
    try:
        dense, _ = load_model(model_id, device="cpu", dtype="float32")
    except WeightsUnavailable as err:
        pytest.skip(str(err))
    pruned = rebuild(dense, removed)
    table = costs.load_table(model_id)
    long = int(table["contexts"][1]) if table and not benchmark.disabled else 16
    short = int(table["contexts"][0]) if table and not benchmark.disabled else 8
    rounds, warmup = (1, 0) if benchmark.disabled else (5, 1)
    works = [Workload("prefill", 1, long), Workload("decode", 1, short, 2 if benchmark.disabled else 16)]

    def measure():
        return [time_pair(dense, pruned, w, rounds, warmup, "cpu") for w in works]

    rows = benchmark.pedantic(measure, rounds=1, iterations=1, warmup_rounds=0)
    n = len(costs.block_types(dense.config))
    for row in rows:
        assert row["speedup"]["n"] == rounds and row["speedup"]["median"] > 0
        predicted = costs.predict(table, row["phase"], removed)
        benchmark.extra_info[row["workload"]] = {
            "speedup_median": round(row["speedup"]["median"], 4), "speedup_min": round(row["speedup"]["min"], 4),
            "speedup_max": round(row["speedup"]["max"], 4), "blocks_only": round(costs.blocks_only(n, len(removed)), 4),
            "cost_table": None if predicted is None else round(predicted, 4)}
        print(f"\n{model_id} -{list(removed)} {row['workload']}: measured {row['speedup']['median']:.3f} "
              f"[{row['speedup']['min']:.3f}-{row['speedup']['max']:.3f}], L/(L-M) {costs.blocks_only(n, len(removed)):.3f}, "
              f"table {'-' if predicted is None else f'{predicted:.3f}'}")
    assert sum(p.numel() for p in pruned.parameters()) < sum(p.numel() for p in dense.parameters())

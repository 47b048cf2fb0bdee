"""Benchmark: a heal's speed as a share of this machine's own float32 matmul throughput, in one process.

A heal of tiny-llama3 without three blocks (LoRA through PEFT, the defaults, float32) is timed, and so are
float32 matmuls at the model's own shapes (the hidden and MLP projections over the heal's tokens); reported
(``extra_info``, and a line with ``-s``): the heal's tokens per second, its FLOP/s (per token each kept block and
the head one forward and one backward, a backward counted as twice a forward, as the planner counts a heal) and
that as a ratio to the matmuls' FLOP/s: a machine-free number, where seconds alone would say which machine ran.
Nothing about time is asserted. The suite (``--benchmark-disable``) heals 1,024 tokens once; measure with
``DEPTHPRUNE_THREADS=2 pytest bench/test_bench_healing.py -p no:xdist --benchmark-enable -s``.
"""

from __future__ import annotations

import time

import torch

from depthprune.data.healing_text import healing_fingerprint, healing_texts
from depthprune.healing import HealConfig
from depthprune.healing.pruned import heal_removed
from depthprune.recipe import Session

REMOVED = [2, 6, 9]


def _matmul_flops_per_second(hidden: int, inner: int, tokens: int, rounds: int = 5) -> float:
    x = torch.randn(tokens, hidden)
    w1, w2 = torch.randn(hidden, inner), torch.randn(inner, hidden)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        (x @ w1) @ w2
        best = min(best, time.perf_counter() - start)
    return 2 * 2 * tokens * hidden * inner / best


def test_heal_speed_against_the_machines_matmuls(benchmark):
    session = Session.open("tiny-llama3", device="cpu", dtype="float32")
    texts, data = healing_texts("tiny"), healing_fingerprint("tiny")
    cfg = HealConfig(tokens=1024 if benchmark.disabled else 16384, seq_len=256)
    reports = []

    def run():
        reports.append(heal_removed(session, REMOVED, cfg, texts, data)[1])

    benchmark.pedantic(run, rounds=1, iterations=1, warmup_rounds=0)
    report = reports[-1]
    assert len(report.losses) == cfg.steps and all(loss == loss for loss in report.losses)
    config = session.model.config
    kept = config.num_hidden_layers - len(REMOVED)
    params_per_block = sum(p.numel() for p in session.model.model.layers[0].parameters())
    head = config.hidden_size * config.vocab_size
    flops = 3 * 2 * report.tokens * (kept * params_per_block + head)
    achieved = flops / report.seconds
    peak = _matmul_flops_per_second(config.hidden_size, config.intermediate_size, cfg.batch_size * cfg.seq_len)
    ratio = achieved / peak
    benchmark.extra_info.update({"tokens": report.tokens, "tokens_per_second": report.tokens_per_second,
                                 "heal_flops_per_second": achieved, "matmul_flops_per_second": peak,
                                 "ratio": ratio, "threads": torch.get_num_threads()})
    print(f"\nheal of tiny-llama3 without {REMOVED}: {report.tokens_per_second:,.0f} tokens/s, "
          f"{achieved / 1e9:.1f} GFLOP/s = {ratio:.2f} x this machine's float32 matmul ({peak / 1e9:.1f} GFLOP/s), "
          f"{torch.get_num_threads()} threads")
    assert ratio > 0

"""Benchmark: the shared-prefix lm-eval model against stock HFLM on the same pruned model.

Both score the same lm-eval requests (the profile's tasks, the first ``limit`` items each,
collected once through lm-eval) in this process, rounds interleaved. The adapter runs twice:
as one evaluation alone, and as a grid runs it, after the dense model's evaluation has stored
its block states (:mod:`depthprune.scoring.dense_states`; the blocks below the first removed one are
then taken from the store). Reported in the benchmark's extra_info and on stdout: the
wall-time ratios adapter / HFLM (min over rounds; never asserted), per task and overall, and the token counts behind it (the model's input
tokens, padding excluded, against stock's distinct inputs). Asserted: the answers agree
(|log-prob diff| <= 1e-4, is_greedy equal) and the token ratio, a count.

The tiny case runs once in the test suite (``--benchmark-disable`` is a default option);
measure with ``pytest bench/test_bench_lm_adapter.py --benchmark-enable -s``, which also
runs the real model (smollm2-135m, loads in ~25 s; skips without its weights).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace

import pytest
from lm_eval.api.model import LM
from lm_eval.models.huggingface import HFLM

from depthprune.evaluation.evaluate import run_lm_eval
from depthprune.evaluation.lm_adapter import AdapterStats, SharedPrefixLM
from depthprune.model import WeightsUnavailable
from depthprune.model.masking import skip_layers
from depthprune.scoring.dense_states import DenseStates

# (model, removed set, items per task, max token ratio asserted). The sets: tiny-llama3's
# {3,7,11} (the cross-check's), smollm2-135m's greedy M=7 solution (README).
SUBJECTS = [
    pytest.param("tiny-llama3", (3, 7, 11), 32, 0.65, id="tiny-llama3"),
    pytest.param("smollm2-135m", (3, 12, 13, 14, 17, 25, 26), 16, 0.7, id="smollm2-135m"),
]


class _Recorder(LM):
    """Collects lm-eval's loglikelihood requests and answers nothing of interest."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list = []

    def loglikelihood(self, requests, disable_tqdm: bool = False):
        self.requests += requests
        return [(0.0, False)] * len(requests)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("no rolling tasks in these profiles")

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("no generation tasks in these profiles")


@pytest.mark.parametrize(("model_id", "removed", "limit", "max_token_ratio"), SUBJECTS)
def test_adapter_vs_stock_hflm(benchmark, model_id, removed, limit, max_token_ratio):
    from depthprune.recipe import Session

    if model_id != "tiny-llama3" and benchmark.disabled:
        pytest.skip("the real model is measured with --benchmark-enable")
    try:
        # float32: the answers are compared with stock HFLM's for equality (tests/evaluation/test_lm_adapter.py)
        session = Session.open(model_id, dtype="float32")
    except WeightsUnavailable as err:
        pytest.skip(str(err))
    cfg = session.profile.eval_config(limit=limit)
    recorder = _Recorder()
    run_lm_eval(recorder, session.profile, cfg)
    by_task: dict[str, list] = defaultdict(list)
    for request in recorder.requests:
        by_task[request.task_name].append(request)
    kwargs = dict(pretrained=session.model, tokenizer=session.tokenizer, batch_size=cfg.batch_size,
                  max_length=session.model.config.max_position_embeddings)
    rounds = 1 if benchmark.disabled else 3
    store = DenseStates()
    dense = SharedPrefixLM(**kwargs, verify=False, dense_blocks=session.n_layers, dense_store=store)
    for requests in by_task.values():  # the grid's dense evaluation (untimed), batched as the timed runs are
        dense.loglikelihood(requests, disable_tqdm=True)
    with skip_layers(session.model, removed):
        stock = HFLM(**kwargs)
        mine = SharedPrefixLM(**kwargs, verify=False)  # the check is a start-up cost; answers are compared below
        reusing = SharedPrefixLM(**kwargs, verify=False, dense_blocks=min(removed), dense_store=store)
        stock_seconds: dict[str, list[float]] = defaultdict(list)
        mine_seconds: dict[str, list[float]] = defaultdict(list)
        reuse_seconds: dict[str, list[float]] = defaultdict(list)
        tokens: dict[str, AdapterStats] = {}
        for _ in range(rounds):
            for task, requests in by_task.items():
                start = time.perf_counter()
                expected = stock.loglikelihood(requests, disable_tqdm=True)
                stock_seconds[task].append(time.perf_counter() - start)
                mine.stats = AdapterStats()
                start = time.perf_counter()
                got = mine.loglikelihood(requests, disable_tqdm=True)
                mine_seconds[task].append(time.perf_counter() - start)
                tokens[task] = replace(mine.stats)  # a copy: the timed run below counts on
                for (lp_a, greedy_a), (lp_b, greedy_b) in zip(expected, got, strict=True):
                    assert abs(lp_a - lp_b) <= 1e-4 and greedy_a == greedy_b, task
                start = time.perf_counter()
                again = reusing.loglikelihood(requests, disable_tqdm=True)
                reuse_seconds[task].append(time.perf_counter() - start)
                assert again == got, task  # exactly the same answers
        all_requests = recorder.requests
        benchmark.pedantic(lambda: mine.loglikelihood(all_requests, disable_tqdm=True), rounds=rounds,
                           iterations=1, warmup_rounds=0)

    per_task = {t: round(min(mine_seconds[t]) / min(stock_seconds[t]), 3) for t in by_task}
    stock_total = sum(min(v) for v in stock_seconds.values())
    mine_total = sum(min(v) for v in mine_seconds.values())
    reuse_total = sum(min(v) for v in reuse_seconds.values())
    shared = reusing.stats.reused_block_tokens / (reusing.stats.reused_block_tokens + reusing.stats.block_tokens)
    run = sum(s.tokens for s in tokens.values())
    stock_run = sum(s.stock_tokens for s in tokens.values())
    benchmark.extra_info.update(
        model=model_id, removed=list(removed), limit=limit, requests=len(all_requests), rounds=rounds,
        wall_time_ratio=round(mine_total / stock_total, 3), wall_time_ratio_per_task=per_task,
        wall_time_ratio_with_dense_states=round(reuse_total / stock_total, 3),
        block_tokens_from_dense_states=round(shared, 3),
        tokens=run, stock_tokens=stock_run, token_ratio=round(run / stock_run, 3),
        token_ratio_per_task={t: round(s.tokens / s.stock_tokens, 3) for t, s in tokens.items()},
        hflm_seconds_min=stock_total, adapter_seconds_min=mine_total,
    )
    print(f"\n{model_id} without {list(removed)}, {len(all_requests)} requests, {rounds} round(s): "
          f"adapter/HFLM wall time {mine_total / stock_total:.3f} (tokens {run}/{stock_run} = {run / stock_run:.3f}); "
          f"after the dense evaluation {reuse_total / stock_total:.3f} ({shared:.0%} of block x tokens from its states)")
    for task in by_task:
        print(f"  {task:22s} time {per_task[task]:.3f}  tokens {tokens[task].tokens / tokens[task].stock_tokens:.3f}")
    assert run / stock_run <= max_token_ratio

"""Benchmark: greedy with the cached scorer vs. a naive loop (one full forward per candidate).

Both run in this process on the same model and calibration batches. Reported (in the
benchmark's extra_info and on stdout): removed sets (must be equal), the layer-forward
ratio (a count: deterministic, asserted <= 0.55) and the wall-time ratio (reported,
never asserted). The test suite runs it once, on the first calibration batch only
(``--benchmark-disable`` is in the default options); measure, on all four, with
``pytest bench/test_bench_scoring.py --benchmark-enable -s``.

Also cbo's energy with and without the blocks' recomputation in its backward (a timing only: a test run skips it).
"""

from __future__ import annotations

import time

import pytest
import torch

from depthprune.data.profiles import TINY
from depthprune.model import TINY_MODELS, WeightsUnavailable, load_model
from depthprune.model.masking import skip_layers
from depthprune.objectives import make_objective
from depthprune.scoring.scorer import Scorer
from depthprune.search import get_searcher
from tests.fixtures import random_model


def naive_greedy(model, batches, n_layers: int, budget: int) -> tuple[tuple[int, ...], int]:
    """SLEB greedy written the plain way: every candidate is a full forward of the model."""
    removed: frozenset[int] = frozenset()
    layer_forwards = 0
    for _ in range(budget):
        best = None
        for i in range(n_layers):
            if i in removed:
                continue
            cand = removed | {i}
            nll, count = 0.0, 0
            with torch.no_grad(), skip_layers(model, cand):
                for batch in batches:
                    logits = model(batch.input_ids, use_cache=False).logits[:, :-1].float()
                    targets = batch.input_ids[:, 1:]
                    nll += torch.nn.functional.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
                    ).item()
                    count += targets.numel()
            layer_forwards += n_layers - len(cand)
            key = (nll / count, tuple(sorted(cand)))
            if best is None or key < best[0]:
                best = (key, cand)
        removed = best[1]
    return tuple(sorted(removed)), layer_forwards


def _subjects():
    out = []
    for model_id in TINY_MODELS:
        out.append(pytest.param(model_id, id=model_id))
    out.append(pytest.param("random-llama-16", id="random-llama-16"))
    return out


def _load(model_id):
    if model_id.startswith("random"):
        from depthprune.objectives.base import Batch

        model = random_model("llama", n_layers=16)
        g = torch.Generator().manual_seed(0)
        return model, [Batch(torch.randint(4, 30, (8, 128), generator=g)) for _ in range(4)]
    try:
        model, tok = load_model(model_id, device="cpu")
    except WeightsUnavailable as err:
        pytest.skip(str(err))
    objective = make_objective("ppl", "tiny")
    return model, objective.prepare(tok, TINY, batch_size=8)


@pytest.mark.parametrize("model_id", _subjects())
def test_greedy_cached_vs_naive(benchmark, model_id):
    budget = 3
    model, batches = _load(model_id)
    if benchmark.disabled:
        # A test run checks answers and counts, not time: the first of the 4 calibration batches
        # (8 windows) is as good a check that the cached scorer picks what the naive loop picks, at a
        # quarter of the cost (both count layer-forwards per scored set, not per batch).
        batches = batches[:1]
    n_layers = model.config.num_hidden_layers
    objective = make_objective("ppl", "tiny")

    def cached():
        scorer = Scorer(model, batches, objective, verify=False)
        result = get_searcher("greedy").search(n_layers=n_layers, budget=budget, score=scorer)
        return result, scorer.stats

    def naive():
        return naive_greedy(model, batches, n_layers, budget)

    rounds = 1 if benchmark.disabled else 3
    result, stats = benchmark.pedantic(cached, rounds=rounds, iterations=1, warmup_rounds=0)
    if benchmark.disabled:  # a test run (CI): the same answer and the layer-forward ratio, no timing
        naive_removed, naive_forwards = naive()
        assert result.removed == naive_removed
        assert stats.layer_forwards / naive_forwards <= 0.55
        return
    # The ratio is taken from timings interleaved in this process, the same rounds each.
    cached_seconds, naive_seconds = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        cached()
        cached_seconds.append(time.perf_counter() - start)
        start = time.perf_counter()
        naive_removed, naive_forwards = naive()
        naive_seconds.append(time.perf_counter() - start)

    layer_ratio = stats.layer_forwards / naive_forwards
    time_ratio = min(cached_seconds) / min(naive_seconds)
    benchmark.extra_info.update(
        removed=list(result.removed), naive_removed=list(naive_removed),
        layer_forwards=stats.layer_forwards, naive_layer_forwards=naive_forwards,
        layer_forward_ratio=round(layer_ratio, 4), wall_time_ratio=round(time_ratio, 4),
        cached_seconds_min=min(cached_seconds), naive_seconds_min=min(naive_seconds), rounds=rounds,
    )
    print(f"\n{model_id}: removed {result.removed} (naive {naive_removed}); layer-forwards "
          f"{stats.layer_forwards}/{naive_forwards} = {layer_ratio:.3f}; wall time ratio {time_ratio:.3f}")
    assert result.removed == naive_removed
    assert layer_ratio <= 0.55


@pytest.mark.parametrize("model_id", _subjects())
def test_energy_without_vs_with_recomputed_blocks(benchmark, model_id):
    """cbo's energy (depthprune.scoring.gates): its gradient passes without the blocks' recomputation, as a model that fits
    runs them, against with it, as a model past gates.KEEP_SHARE runs them. Reported: the wall-time ratio (timings
    interleaved in this process, the best of the same rounds each); asserted: the same (h, J), to the bit. A test
    run skips it (tests/scoring/test_scorer.py holds the two equal); measure with ``--benchmark-enable -s``."""
    if benchmark.disabled:
        pytest.skip("a timing: run with --benchmark-enable (the equality is tests/scoring/test_scorer.py's)")
    from depthprune.scoring.calibration import CalibrationData
    from depthprune.scoring.gates import quadratic_energy

    model, batches = _load(model_id)
    data = CalibrationData.build(model, batches, make_objective("ppl", "tiny"))
    h = [0.0] * model.config.num_hidden_layers
    kept = benchmark.pedantic(lambda: quadratic_energy(data, h, limit=1 << 40), rounds=1, iterations=1)
    seconds: dict[str, list[float]] = {"kept": [], "recomputed": []}
    for _ in range(3):
        for name, limit in (("kept", 1 << 40), ("recomputed", 0)):
            start = time.perf_counter()
            energy = quadratic_energy(data, h, limit=limit)
            seconds[name].append(time.perf_counter() - start)
            assert energy == kept
    ratio = min(seconds["kept"]) / min(seconds["recomputed"])
    benchmark.extra_info.update(wall_time_ratio=round(ratio, 4), **{f"{k}_seconds_min": min(v) for k, v in seconds.items()})
    print(f"\n{model_id}: energy without recomputation / with it: {ratio:.3f} (best of 3 each, interleaved)")


@pytest.mark.parametrize("objective", ["ppl", "margin"])
def test_verify_sets_in_prefix_order_vs_one_call_each(benchmark, objective):
    """The sets ``depthprune verify`` re-scores for one condition of the tiny archive (tiny-llama3), in prefix
    order (``Scorer.prefetch``) against one call each in the cells' order, as verify scored them before. Both on
    fresh scorers of one session, rounds interleaved. Reported: the layer-forward ratio (a count) and the
    wall-time ratio (the best of 3 each); asserted: the same losses, to the bit. A test run skips it
    (tests/scoring/test_scorer.py holds the two equal); measure with ``--benchmark-enable -s -n 0``."""
    if benchmark.disabled:
        pytest.skip("a timing: run with --benchmark-enable (the equality is tests/scoring/test_scorer.py's)")
    from pathlib import Path

    from depthprune.recipe import Session
    from depthprune.results.schema import calibration_of
    from depthprune.verify.remeasure import calibration_requests
    from depthprune.verify.run import select_cells
    from depthprune.verify.second import check_scorer

    archive = Path(__file__).resolve().parents[1] / "archive"
    cells = [r for r in select_cells([archive], ["tiny"])
             if r.identity.model == "tiny-llama3" and r.identity.objective == objective]
    key = calibration_of(cells[0])
    requests = calibration_requests([r for r in cells if calibration_of(r) == key])
    session = Session.open("tiny-llama3", device="cpu")

    def one_each():
        scorer = check_scorer(session, key)
        dense, start = scorer.stats.layer_forwards, time.perf_counter()
        losses = [scorer(s) for s in requests]
        return losses, time.perf_counter() - start, scorer.stats.layer_forwards - dense

    def prefix_order():
        scorer = check_scorer(session, key)
        dense, start = scorer.stats.layer_forwards, time.perf_counter()
        scorer.prefetch(requests)
        losses = scorer.many(requests)
        return losses, time.perf_counter() - start, scorer.stats.layer_forwards - dense

    benchmark.pedantic(prefix_order, rounds=1, iterations=1)
    runs: dict[str, list] = {"one": [], "prefix": []}
    for _ in range(3):
        runs["one"].append(one_each())
        runs["prefix"].append(prefix_order())
    assert all(r[0] == runs["one"][0][0] for rs in runs.values() for r in rs), "prefix order changed a loss"
    blocks = runs["prefix"][0][2] / runs["one"][0][2]
    ratio = min(r[1] for r in runs["prefix"]) / min(r[1] for r in runs["one"])
    benchmark.extra_info.update(sets=len(set(requests)), requests=len(requests), layer_forward_ratio=round(blocks, 4),
                                wall_time_ratio=round(ratio, 4), dtype=str(session.dtype))
    print(f"\ntiny-llama3 {objective}: verify's {len(set(requests))} sets in prefix order / one call each: "
          f"layer-forwards {blocks:.3f}, wall time {ratio:.3f} (best of 3 each, interleaved; {session.dtype})")

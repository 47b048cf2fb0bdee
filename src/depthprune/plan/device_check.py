"""The first GPU contact, prepared: the suite's own calibration and search phases, timed on stand-ins.

The device tool's command (an H200 for ~15 minutes, no network, the working tree only)::

    PYTHONPATH=src python3 -m depthprune.cli measure device --out $OUT --size gpu --device cuda

Why: no GPU has run this suite yet, and ``depthprune plan`` prices a GPU grid at an assumed 35 % MFU.
This measures what the suite's code achieves and writes ``DIR/throughput.json``, which
``depthprune plan --throughput FILE`` uses instead of the assumption.

What runs, per stand-in shape (random bf16 weights built on the device with transformers'
``LlamaConfig``/``AutoModelForCausalLM.from_config``; calibration = random token ids, seed 0):
``--size gpu``: smollm2-135m's shape and llama3.1-8b's (both from :data:`depthprune.plan.shapes.SHAPES`),
the paper's 128 x 2048 calibration tokens in micro-batches of 8 (as the planner assumes);
``--size tiny``: two tiny shapes, 2 x 32 tokens, for a CPU test in seconds. The phases are the
suite's, not re-implementations: ``dense`` (:class:`~depthprune.scoring.scorer.Scorer` with the ``ppl``
objective's batch statistics: the dense pass and its start-up self-check), ``head`` (the output
head and the ``ppl`` statistics alone, on random final hidden states: what every scored set pays once
besides its blocks), ``gate_weights`` and
``gate_gradient`` (:mod:`depthprune.scoring.gates`: the reduce weights' dense pass and one gate-gradient pass,
what cbo's energy repeats L+1 times), ``prior`` (the single removals, as ``Calibration.build``),
then ``oneshot``, ``greedy`` and ``cbo`` at M=7 through :meth:`depthprune.recipe.Calibration.search`
itself (a fork of the scorer, cost as if alone). Each phase reports seconds, layer-forwards (the
scorer's stats; for the gate phases :func:`depthprune.scoring.gates.energy_passes`' accounting),
layer-forwards/s, tokens/s (full-depth equivalents), achieved TFLOP/s (FLOPs as the planner counts
them) and peak memory (``torch.cuda.max_memory_allocated``; on a CPU the process's peak RSS so far).

Bounded to fit 8 minutes on an H200 (``--budget-s``, default 360 s after start-up): the shapes share
the budget 1 : 9; ``greedy`` stops at its shape's deadline (checked before each new set, so it
overruns by at most one set) and its full run is extrapolated from the planner's simulated
layer-forwards at the measured rate, said so in the output; ``cbo`` (L+1 gradient passes) runs only
where its estimate from the measured passes fits; ``prior`` stops only at a hard stop (70 s after the
budget), and then oneshot and greedy are skipped with estimates. Estimated at 35 % MFU (bf16 peak
989 TFLOP/s): smollm2's shape ~35 s; the 8B shape's build, dense pass and gate phases ~90 s, its prior
~290 s (the prefix cache's budget, 40 % of free memory, holds 24 of the 32 boundaries of 128 x 2048
tokens and evicts, so the singles run ~601 layer-forwards where results count 496, by a replay of
the cache's policy), oneshot ~10 s and one greedy set ~14 s: ~440 s after start-up, which takes
~15 s. A faster GPU leaves greedy more time. A phase that fails (e.g. out of memory) is recorded and
the next one runs; the JSON is rewritten after every phase, so a run that is killed still leaves what
it measured.

Needs only torch and transformers (and numpy, scipy, tqdm, botorch, which the searchers import): no
tokenizer, weights, network, ``datasets``, ``lm_eval`` or ``gguf``. Of the package's modules only
``depthprune.evaluation.lm_adapter`` (``lm_eval``) and ``depthprune.evaluation.task_files`` (``datasets``) import those at
import time; nothing here imports either (``datasets`` is imported inside ``data/sources.py``'s loaders,
``lm_eval`` inside ``evaluation/evaluate.py``'s and ``data/profiles.py``'s functions).
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import resource
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import torch

from depthprune.common.jsonio import write_json_atomic
from depthprune.objectives.ppl import PerplexityObjective
from depthprune.plan.device_env import environment_info, environment_lines
from depthprune.plan.device_phases import (
    DTYPE,
    SIZES,
    Deadline,
    OutOfTime,
    Phase,
    ShapeRun,
    Watched,
    build_model,
    calibration_batches,
)
from depthprune.plan.shapes import ModelShape
from depthprune.plan.simulation import SyntheticLandscape, simulate
from depthprune.plan.throughput import THROUGHPUT_SCHEMA
from depthprune.recipe import Calibration
from depthprune.scoring.gates import energy_passes, gate_gradient, reduce_weights
from depthprune.scoring.scorer import Scorer
from depthprune.search import get_searcher

BUDGET = 7  # M, the paper's smaller budget
TREE_LIMIT = 64 << 20  # what the device tool carries: the working tree, 64 MiB in all


# -- measuring -----------------------------------------------------------------------------------------


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _reset_peak(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def _peak(device: str) -> tuple[int, str]:
    if device == "cuda":
        return int(torch.cuda.max_memory_allocated()), "torch.cuda.max_memory_allocated during the phase"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "peak RSS of the process so far (Linux)"


def _free(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


class Check:
    """One run: the stand-ins in order, each phase measured, the JSON rewritten after each."""

    def __init__(self, out: Path, size: str, device: str, budget_s: float | None = None) -> None:
        self.out, self.size_name, self.device = out, size, device
        self.size = SIZES[size]
        self.budget_s = self.size.budget_s if budget_s is None else budget_s
        self.info = environment_info(device)
        self.start = time.perf_counter()
        self.end = self.start + self.budget_s
        self.hard_end = self.end + self.size.slack_s
        self.deadline = Deadline()
        self.peak_flops = None if self.info["peak_bf16_tflops"] is None else self.info["peak_bf16_tflops"] * 1e12
        self.runs: list[ShapeRun] = []
        self.created = datetime.now(timezone.utc).isoformat(timespec="seconds")

    @property
    def path(self) -> Path:
        return self.out / "throughput.json"

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def to_dict(self, finished: bool) -> dict[str, Any]:
        s = self.size
        return {"schema": THROUGHPUT_SCHEMA, "created": self.created, "size": self.size_name, "device": self.device,
                "dtype": str(DTYPE).removeprefix("torch."), "removal_budget": BUDGET, "budget_seconds": self.budget_s,
                "elapsed_seconds": self.elapsed(), "finished": finished, "environment": self.info,
                "calibration": {"samples": s.samples, "seq_len": s.seq_len, "batch_size": s.batch_size, "seed": 0,
                                "inputs": "random token ids (no tokenizer)"},
                "shapes": [r.to_dict(self.peak_flops) for r in self.runs],
                "command": " ".join(sys.argv)}

    def save(self, finished: bool = False) -> None:
        write_json_atomic(self.path, self.to_dict(finished))

    def measure(self, run: ShapeRun, name: str, body: Callable[[Phase], None]) -> Phase:
        """Run ``body`` as phase ``name``: timed, memory-peaked, failures recorded, then saved and printed."""
        rec = Phase(name)
        _sync(self.device)
        _reset_peak(self.device)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                body(rec)
            except Exception as err:  # noqa: BLE001 - one device contact: record it, run the next phase
                rec.status = "failed"
                rec.note = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:400]
            if rec.status == "failed":  # out here the exception, and the tensors its frames held, are gone
                _free(self.device)
            _sync(self.device)
        rec.wall_seconds = time.perf_counter() - start
        if rec.status == "complete" and not rec.seconds:
            rec.seconds = rec.wall_seconds
        rec.peak_memory_bytes, rec.memory = _peak(self.device)
        rec.warnings = sorted({str(w.message).splitlines()[0][:300] for w in caught})[:8]
        run.phases[name] = rec
        self.save()
        print(self.line(run, rec), flush=True)
        return rec

    def line(self, run: ShapeRun, p: Phase) -> str:
        r = p.rates(run.shape, run.calibration["tokens"], run.calibration["seq_len"])
        fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
        mem = "-" if p.peak_memory_bytes is None else f"{p.peak_memory_bytes / 2**30:.2f} GiB"
        text = (f"[{self.elapsed():6.1f}s] {run.shape.model:<13} {p.name:<13} {p.status:<8} {p.seconds:8.2f} s "
                f"(wall {p.wall_seconds:.2f}) {p.layer_forwards:6d} layer-fwd {p.layer_backwards:5d} bwd "
                f"{p.evaluations:4d} sets  {fmt(r['layer_forwards_per_second'], ',.2f')} layer-fwd/s  "
                f"{fmt(r['tokens_per_second'], ',.0f')} tok/s  {fmt(r['achieved_tflops'], ',.3g')} TFLOP/s  "
                f"peak {mem}")
        extra = [x for x in (p.note, p.extrapolated and p.extrapolated.get("text")) if x]
        extra += [f"warning: {w}" for w in p.warnings[:3]]
        return text + "".join(f"\n{'':10}{x}" for x in extra)

    # -- the phases of one shape ------------------------------------------------------------------------
    def run_shape(self, shape: ModelShape, share: float) -> None:
        s = self.size
        run = ShapeRun(shape, {"samples": s.samples, "seq_len": s.seq_len, "batch_size": s.batch_size,
                               "tokens": s.samples * s.seq_len, "micro_batches": math.ceil(s.samples / s.batch_size)})
        shape_end = time.perf_counter() + max(0.0, self.end - time.perf_counter()) * share
        run.deadline_s = shape_end - self.start
        self.runs.append(run)
        state: dict[str, Any] = {}
        self.measure(run, "build", lambda rec: self._build(run, rec, state))
        if "model" in state:
            self.measure(run, "dense", lambda rec: self._dense(run, rec, state))
        if "scorer" in state:
            self.measure(run, "head", lambda rec: self._head(rec, state))
            self.measure(run, "gate_weights", lambda rec: self._gate_weights(rec, state))
        if "weights" in state:
            self.measure(run, "gate_gradient", lambda rec: self._gate_gradient(rec, state))
            self.measure(run, "prior", lambda rec: self._prior(rec, state))
        if "calibration" in state:
            self.measure(run, "oneshot", lambda rec: self._search(run, rec, state, "oneshot", self.hard_end))
            self.measure(run, "greedy", lambda rec: self._search(run, rec, state, "greedy", shape_end))
            self.measure(run, "cbo", lambda rec: self._cbo(run, rec, state, shape_end))
        else:
            for name in ("oneshot", "greedy", "cbo"):
                self.measure(run, name, lambda rec: self._skip(run, rec, state))
        state.clear()
        _free(self.device)

    def _build(self, run: ShapeRun, rec: Phase, state: dict[str, Any]) -> None:
        model = build_model(run.shape, self.device, self.size.seq_len)
        run.params = sum(p.numel() for p in model.parameters())
        if run.params != run.shape.params:
            rec.note = f"parameters {run.params:,} != the planner's formula {run.shape.params:,}"
        state["model"] = model

    def _dense(self, run: ShapeRun, rec: Phase, state: dict[str, Any]) -> None:
        s = self.size
        batches = calibration_batches(run.shape.vocab, s.samples, s.seq_len, s.batch_size)
        objective = PerplexityObjective(dataset="random-ids", n_samples=s.samples, seq_len=s.seq_len)
        scorer = Scorer(state["model"], batches, objective)  # the dense pass, then the start-up self-check
        run.dense_loss = scorer.dense_loss
        state["dense_seconds"] = scorer.stats.seconds
        rec.seconds, rec.layer_forwards, rec.evaluations = (scorer.stats.seconds, scorer.stats.layer_forwards,
                                                            scorer.stats.evaluations)
        rec.note = (f"dense loss {scorer.dense_loss:.4f}; self-check {scorer.stats.verify_layer_forwards} "
                    f"layer-forwards (wall only); prefix cache {'on' if scorer.prefix_cache else 'OFF'}, "
                    f"budget {scorer.cache.max_bytes / 2**30:.1f} GiB, holding {scorer.cache.bytes / 2**30:.2f} GiB")
        state["objective"], state["scorer"] = objective, Watched(scorer, self.deadline)

    def _head(self, rec: Phase, state: dict[str, Any]) -> None:
        """One head pass over the calibration set, through the objective's own statistics."""
        data = state["scorer"].data
        hidden_size = data.model.config.hidden_size
        generator = torch.Generator(device=data.device).manual_seed(0)
        total = torch.zeros(2, dtype=torch.float64, device=data.device)
        with torch.no_grad():
            for batch in data.batches:
                hidden = torch.randn(*batch.input_ids.shape, hidden_size, device=data.device, dtype=DTYPE,
                                     generator=generator)
                total += data.objective.batch_stats(hidden, batch, data.head)
        rec.evaluations = 1
        rec.note = f"random final states: loss {float(total[0] / total[1]):.3f}"

    def _gate_weights(self, rec: Phase, state: dict[str, Any]) -> None:
        data = state["scorer"].data
        state["weights"] = reduce_weights(data)
        rec.layer_forwards, rec.evaluations = data.n_layers, 1  # one dense pass (energy_passes' first term)

    def _gate_gradient(self, rec: Phase, state: dict[str, Any]) -> None:
        data = state["scorer"].data
        L = data.n_layers
        grad = gate_gradient(data, frozenset(), state["weights"])
        forwards, backwards = energy_passes(L)
        rec.layer_forwards, rec.layer_backwards = (forwards - L) // (L + 1), backwards // (L + 1)  # one of L+1 passes
        rec.note = f"|dloss/dx| max {grad.abs().max().item():.3g}; cbo's energy runs {L + 1} of these + gate_weights"

    def _prior(self, rec: Phase, state: dict[str, Any]) -> None:
        """The single removals, as ``Calibration.build`` computes them; stopped only at the hard stop."""
        watched: Watched = state["scorer"]
        before = watched.stats.layer_forwards, watched.stats.evaluations, watched.stats.seconds
        prior: list[float] = []
        self.deadline.arm(self.hard_end)
        try:
            for i in range(watched.n_layers):
                prior.append(watched(frozenset([i])))
        except OutOfTime:
            rec.status = "bounded"
        finally:
            self.deadline.arm(math.inf)
            st = watched.stats
            rec.layer_forwards, rec.evaluations = st.layer_forwards - before[0], st.evaluations - before[1]
            rec.seconds = st.seconds - before[2]
        L = watched.n_layers
        if len(prior) < L:
            total = L * (L - 1) // 2  # every single from the dense states (a budget that does not bind)
            rec.note = f"hard stop after {len(prior)} of {L} singles: oneshot and greedy are skipped"
            rec.extrapolated = self._extrapolate(rec, total, f"all {L} singles, each from the dense states")
            return
        state["calibration"] = Calibration(session=cast(Any, None), objective=state["objective"],
                                           scorer=cast(Scorer, watched), prior=prior,
                                           dense_seconds=state["dense_seconds"],
                                           prior_seconds=rec.seconds)

    def _search(self, run: ShapeRun, rec: Phase, state: dict[str, Any], searcher: str, until: float) -> None:
        """``Calibration.search`` itself, on a watched scorer: stopped (bounded) at ``until``."""
        calib: Calibration = state["calibration"]
        watched: Watched = state["scorer"]
        self.deadline.arm(until)
        try:
            outcome = calib.search(searcher, BUDGET, seed=0)
        except OutOfTime:
            outcome = None
            rec.status = "bounded"
        finally:
            self.deadline.arm(math.inf)
        fork = watched.forks[-1].scorer
        rec.seconds, rec.layer_forwards, rec.evaluations = (fork.stats.seconds, fork.stats.layer_forwards,
                                                            fork.stats.evaluations)
        rec.layer_backwards = fork.stats.layer_backwards
        if outcome is not None:
            rec.counted_layer_forwards = int(outcome.cost["layer_forwards"])
            rec.removed = list(outcome.removed)
            rec.note = (f"removed {rec.removed}; a result would count {rec.counted_layer_forwards} layer-forwards "
                        f"({outcome.cost['evaluations']} sets, the prior charged when used)")
        else:
            largest = max((len(s) for s in fork.set_seconds), default=0)
            rec.note = (f"stopped at the shape's deadline after {rec.evaluations} new set(s), the largest of "
                        f"{largest} layers")
            L = run.shape.layers
            runs = [simulate(searcher, {}, L, BUDGET, SyntheticLandscape(L, seed)) for seed in range(4)]
            total = sum(r.layer_forwards for r in runs) / len(runs)
            rec.extrapolated = self._extrapolate(
                rec, total, f"the planner's count for {searcher} M={BUDGET} at {L} layers: its mean over 4 synthetic "
                            "loss landscapes, as results count")
        del watched.forks[:]  # the fork's states go with it

    def _cbo(self, run: ShapeRun, rec: Phase, state: dict[str, Any], until: float) -> None:
        """cbo's search (L+1 gate-gradient passes, then its top-K sets), where the estimate fits."""
        grad, weights, prior = (run.phases.get(n) for n in ("gate_gradient", "gate_weights", "prior"))
        L = run.shape.layers
        per_set = prior.seconds / max(1, prior.evaluations) if prior else 0.0
        top_k = cast(Any, get_searcher("cbo")).top_k  # cbo's own attribute, not the Searcher protocol's
        estimate = ((L + 1) * grad.wall_seconds + weights.wall_seconds + top_k * per_set
                    if grad and weights and grad.status == "complete" else math.inf)
        left = until - time.perf_counter()
        if estimate > left:
            rec.status = "skipped"
            rec.note = (f"estimated {estimate:.1f} s ({L + 1} gate-gradient passes + the reduce weights + {top_k} sets "
                        f"at the measured times) > {max(0.0, left):.1f} s left for this shape")
            return
        self._search(run, rec, state, "cbo", until)

    def _skip(self, run: ShapeRun, rec: Phase, state: dict[str, Any]) -> None:
        rec.status = "skipped"
        rec.note = "the prior is incomplete or an earlier phase failed"

    def _extrapolate(self, rec: Phase, total: float, basis: str) -> dict[str, Any] | None:
        if rec.seconds <= 0 or rec.layer_forwards <= 0:
            return None
        rate = rec.layer_forwards / rec.seconds
        return {"layer_forwards": total, "seconds": total / rate, "basis": basis,
                "text": f"EXTRAPOLATED, not measured: the whole phase is ~{total:,.0f} layer-forwards ({basis}); "
                        f"at this phase's measured {rate:,.3g} layer-forwards/s that is ~{total / rate:,.3g} s"}

    def run(self) -> int:
        """All shapes, in order; 0 if no phase failed, else 1 (the JSON holds every phase either way)."""
        for line in environment_lines(self.info):
            print(line, flush=True)
        s = self.size
        print(f"size       {self.size_name}: {len(s.shapes)} stand-ins, {s.samples} x {s.seq_len} tokens in "
              f"micro-batches of {s.batch_size}, bf16, M={BUDGET}; budget {self.budget_s:.0f} s (hard stop "
              f"{self.hard_end - self.start:.0f} s)", flush=True)
        for k, shape in enumerate(s.shapes):
            self.run_shape(shape, s.shares[k] / sum(s.shares[k:]))
        self.save(finished=True)
        failed = [f"{r.shape.model}/{n}" for r in self.runs for n, p in r.phases.items() if p.status == "failed"]
        print(f"wrote {self.path} after {self.elapsed():.1f} s; failed phases: {', '.join(failed) or 'none'}",
              flush=True)
        return 1 if failed else 0


# -- what the device tool carries ----------------------------------------------------------------------


_CHECKOUT = Path(__file__).resolve().parents[3]


def tree_bytes(root: str | Path = _CHECKOUT, untracked: bool = True) -> tuple[int, int]:
    """(bytes, files) the device tool sends: tracked files plus untracked ones git does not ignore
    (of the checkout this module lives in, by default). ``untracked=False``: the tracked files only, what a
    clean clone sends (a test suite's own transient files in the checkout are not the repository's)."""
    others = ["--others", "--exclude-standard"] if untracked else []
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", *others], cwd=root,
                             capture_output=True, check=True, timeout=60).stdout
    total = files = 0
    for name in {n for n in listing.decode().split("\0") if n}:
        path = Path(root) / name
        if path.is_symlink() or path.is_file():  # a tracked file deleted in the working tree is not sent
            total += path.lstat().st_size
            files += 1
    return total, files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``depthprune measure device``."""
    parser.add_argument("--out", default=None, metavar="DIR", help="where throughput.json goes")
    parser.add_argument("--size", choices=tuple(SIZES), default="gpu",
                        help="gpu: smollm2-135m's and llama3.1-8b's shapes, 128 x 2048 tokens; tiny: a CPU test")
    parser.add_argument("--device", choices=("cuda", "cpu"), default=None, help="default: cuda if available")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="seconds for the phases after start-up (default: gpu 360, tiny 120); the prior's hard "
                             "stop is 70 s (tiny: 30 s) later")
    parser.add_argument("--tree-size", action="store_true",
                        help="print the size of what the device tool carries (git's files) and exit")


def run(args: argparse.Namespace) -> int:
    """``depthprune measure device``: the check, or with ``--tree-size`` only the size of what the device tool carries."""
    from depthprune.common.errors import InputError

    if args.tree_size:
        total, files = tree_bytes()
        print(f"working tree sent to the device: {files} files, {total / 2**20:.2f} MiB (limit {TREE_LIMIT >> 20} MiB)")
        return 0 if total < TREE_LIMIT else 1
    if args.out is None:
        raise InputError("--out is required")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: torch sees no CUDA device")
    threads = os.environ.get("DEPTHPRUNE_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    return Check(Path(args.out), args.size, device, args.budget_s).run()

"""A grid planned: each cell's counts, FLOPs, GPU-hours and memory, the totals, the tasks and the notes."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from depthprune.grid.cases import Cell, Grid
from depthprune.model.output_head import grad_chunk_rows
from depthprune.model.registry import MODELS
from depthprune.plan.assumptions import EVAL_TASKS, WIKITEXT2_TEST_TOKENS, Assumptions, assumption_lines
from depthprune.plan.bounds import evaluation_bounds, forwards_bound
from depthprune.plan.gpus import GPU, GPUS
from depthprune.plan.shapes import ModelShape, model_shape
from depthprune.plan.simulation import Simulated, SyntheticLandscape, simulate
from depthprune.plan.throughput import Rate, Throughput, measured_rate, throughput_lines
from depthprune.search import SEARCHERS

GIB = 1 << 30


@dataclass(frozen=True)
class Memory:
    """GiB one worker holds at its peak, by component, and the prefix cache's budget and demand.

    Besides the weights and the prefix cache, a worker holds at one time the largest of: a search
    run's captured states (up to the cache's budget again: a run captures before the cache trims)
    plus one micro-batch's activations; an evaluation batch's logits; cbo's gate-gradient backward.
    """

    weights: float
    in_flight: float  # the largest phase below
    phase: str  # "search" | "evaluation" | "cbo backward"
    cuda_context: float
    cache_budget: float  # scoring.scorer._default_cache_bytes; what the cache holds (spares fill what kept states leave)
    cache_demand: float  # the kept states: dense + keep_best sets of each size, every boundary

    @property
    def peak(self) -> float:
        return self.weights + self.cache_budget + self.in_flight + self.cuda_context


@dataclass
class CellPlan:
    cell: str
    model: str
    objective: str
    search: str
    budget: int
    n_layers: int
    calibration_tokens: int
    evaluations: tuple[int, int]  # (fewest, most) from the settings
    layer_forwards: float  # expected (see basis)
    layer_forwards_range: tuple[int, int]  # over the landscapes (the bound where not simulated)
    layer_forwards_bound: int  # every set from the embeddings, at the most evaluations
    layer_backwards: int
    basis: str
    search_tflop: float
    eval_tflop: float | None  # None: the profile's tasks are not in EVAL_TASKS
    shared_tflop: float  # the dense pass and the prior, which a grid run computes once per condition
    gpu_hours: float
    gpu_hours_bound: float
    memory: Memory
    measured: dict[str, Any] | None = None


@dataclass
class GridPlan:
    grid: str
    assumptions: Assumptions
    gpu: GPU
    shapes: dict[str, ModelShape]
    cells: list[CellPlan]
    totals: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, dict[str, float]] = field(default_factory=dict)  # split -> task -> GPU-hours
    notes: list[str] = field(default_factory=list)
    throughput: Throughput | None = None  # measured rates replace the assumed MFU (plan_grid)
    rates: dict[str, Rate] = field(default_factory=dict)  # model -> its measured rate (with throughput only)
    micro_batches: dict[str, tuple[int, int]] = field(default_factory=dict)  # objective -> (batch, tokens)

    def assumption_text(self) -> list[str]:
        lines = assumption_lines(self.assumptions, self.gpu)
        if self.throughput is not None:  # the measurement replaces the MFU sentence
            at = next(i for i, line in enumerate(lines) if line.startswith("Throughput:"))
            lines[at:at + 1] = throughput_lines(self.throughput, self.rates, self.micro_batches)
        return lines

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "grid": self.grid, "assumptions": asdict(self.assumptions), "gpu": asdict(self.gpu),
            "assumption_text": self.assumption_text(),
            "shapes": {k: {**asdict(v), "params": v.params} for k, v in self.shapes.items()},
            "cells": [{**asdict(c), "peak_gib": c.memory.peak} for c in self.cells],
            "totals": self.totals, "tasks": self.tasks, "notes": self.notes,
        }
        if self.throughput is not None:
            out["throughput"] = {**self.throughput.to_dict(),
                                 "per_model": {m: {"forward_tflops": r.forward / 3600 / 1e12,
                                                   "gradient_tflops": r.gradient / 3600 / 1e12, "source": r.source}
                                               for m, r in self.rates.items()}}
        return out


def calibration_tokens(grid: Grid, objective: str, a: Assumptions,
                       measured_tokens: int | None = None) -> tuple[int, int]:
    """(tokens of one pass over the calibration set, tokens per sequence), from the case file."""
    from depthprune.data.profiles import get_profile
    from depthprune.objectives import make_objective

    obj = make_objective(objective, get_profile("paper"), **grid.objective_params.get(objective, {})).params()
    if "n_samples" in obj and "seq_len" in obj:
        return int(obj["n_samples"]) * int(obj["seq_len"]), int(obj["seq_len"])
    items = int(obj.get("n_items", obj.get("n_samples", 1)))
    per_item = a.margin_tokens_per_item if not measured_tokens else max(1, round(measured_tokens / items))
    return items * per_item, per_item


def eval_tokens(grid: Grid, profile: str) -> tuple[int, int] | None:
    """(tokens one evaluation reads, its window length); None where the tasks are not tabled."""
    cfg = grid.eval_config(profile)
    if profile != "paper" or any(t not in EVAL_TASKS for t in cfg.tasks):
        return None
    tokens = 0
    if "wikitext2" in cfg.perplexity:
        tokens += (WIKITEXT2_TEST_TOKENS // cfg.seq_len) * cfg.seq_len
    if "c4" in cfg.perplexity:
        tokens += cfg.c4_windows * cfg.seq_len
    for task in (*cfg.tasks, *(("lambada",) if cfg.lambada else ())):
        docs, requests, per = EVAL_TASKS[task]
        tokens += min(docs, cfg.limit or docs) * requests * per
    return tokens, cfg.seq_len


def worker_memory(shape: ModelShape, grid: Grid, a: Assumptions, gpu: GPU, calib_tokens: int, seq: int,
                  gate_gradients: bool, budget: int, profile: str) -> Memory:
    """One worker's peak by component (see :class:`Memory` and :func:`~depthprune.plan.assumptions.assumption_lines`);
    ``gate_gradients``: the searcher's cost has gate-gradient passes (:attr:`~depthprune.search.base.Bounds.energy`)."""
    b = a.dtype_bytes
    weights = shape.params * b
    budget_bytes = max(0.0, a.cache_fraction * (gpu.memory_gib * GIB - weights - a.cuda_context_gib * GIB))
    state = calib_tokens * shape.hidden * b  # one boundary's states over the calibration set
    demand = (shape.layers + a.keep_best * sum(shape.layers - s for s in range(1, budget + 1))) * state
    micro = grid.batch_size * seq
    logits = shape.vocab * (b + 8)  # per token: logits, their float copy, log-softmax / logsumexp
    block = (6 * shape.hidden + 3 * shape.intermediate) * b  # per token through one block (hidden- and MLP-sized)
    phases = {  # one micro-batch through a block + a 2048-token head chunk
        "search": min(budget_bytes, shape.layers * state) + micro * block + 2048 * logits}
    ev = grid.eval_config(profile)
    phases["evaluation"] = ev.batch_size * ev.seq_len * block + 2048 * logits  # the head is chunked
    if gate_gradients:  # cbo's energy: weights frozen, blocks and head chunks recomputed (scoring/gates.py):
        # per block its input and gated update are kept; one block's norm, q/k/v/out, MLP and gate
        # inputs live at a time in the backward, and one head chunk's logits
        per_layer = 5 * shape.hidden + 2 * shape.kv_heads * shape.head_dim + 3 * shape.intermediate
        grad_rows = grad_chunk_rows(shape.vocab, 2048)
        phases["cbo backward"] = (2 * shape.layers * micro * shape.hidden * b + micro * per_layer * b
                                  + grad_rows * logits)
    phase = max(phases, key=phases.__getitem__)
    # the kept states take min(budget, demand); other sets' states fill the rest as spares (scoring/state_cache.py)
    return Memory(weights / GIB, phases[phase] / GIB, phase, a.cuda_context_gib, budget_bytes / GIB, demand / GIB)


def _measured_index(dirs: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Measured results by (grid, cell), and each searcher's counted / bound layer-forwards ratio."""
    from depthprune.results.store import iter_results

    by_cell: dict[str, dict[str, Any]] = {}
    sums: dict[str, list[float]] = {}
    for stand_in in (False, True):
        for r in iter_results(dirs, stand_in=stand_in):
            ident = r.identity
            n, m = int(r["n_layers"]), int(ident.budget)
            try:
                bound = forwards_bound(n, evaluation_bounds(ident.search, r["search_params"], n, m))
            except (TypeError, ValueError):
                continue
            by_cell.setdefault(r["cell"], {
                "grid": ident.grid, "stand_in": bool(ident.stand_in), "n_layers": n,
                "evaluations": r["cost"]["evaluations"], "layer_forwards": r["cost"]["layer_forwards"],
                "tokens_per_pass": (r.get("calibration_protocol") or {}).get("tokens_per_pass")})
            acc = sums.setdefault(ident.search, [0.0, 0.0])
            acc[0] += r["cost"]["layer_forwards"]
            acc[1] += bound
    return by_cell, {k: v[0] / v[1] for k, v in sums.items() if v[1] > 0}


def plan_cell(grid: Grid, cell: Cell, shape: ModelShape, a: Assumptions, gpu: GPU,
              measured: dict[str, Any] | None = None, ratios: dict[str, float] | None = None,
              memo: dict[tuple, list[Simulated]] | None = None, rate: Rate | None = None) -> CellPlan:
    """One cell's counts, FLOPs, GPU-hours and memory (``memo``: simulations shared between cells;
    ``rate``: a measured one, :func:`~depthprune.plan.throughput.measured_rate`, instead of the GPU's peak at the assumed MFU)."""
    params = grid.search_params(cell)  # the cell's variant too (the real grid's rank panel samples 512 sets)
    n, m = shape.layers, cell.budget
    bounds = evaluation_bounds(cell.search, params, n, m)
    bound = forwards_bound(n, bounds)
    backwards, evaluations = 0, (bounds.low + bounds.high) / 2
    ratio = (ratios or {}).get(cell.search)
    planned = SEARCHERS[cell.search].planned  # how the searcher says it is counted
    if planned == "fixed":  # no loss search: the sets it scores are fixed by the settings
        expected, spread, basis, evaluations = float(bound), (bound, bound), "fixed (no loss search)", bounds.high
    elif planned == "bound":
        expected = bound * ratio if ratio else float(bound)
        spread = (round(expected), round(expected))
        basis = f"bound x measured {ratio:.2f}" if ratio else "bound (not simulated)"
        evaluations = bounds.high
    else:
        key = (cell.search, repr(sorted(params.items())), n, m, cell.seed, a.landscapes, a.keep_best)
        memo = {} if memo is None else memo
        if key not in memo:
            memo[key] = [simulate(cell.search, params, n, m, SyntheticLandscape(n, seed), seed=cell.seed,
                                  keep_best=a.keep_best) for seed in range(a.landscapes)]
        runs = memo[key]
        counts = [r.layer_forwards for r in runs]
        expected, spread = sum(counts) / len(counts), (min(counts), max(counts))
        backwards = max(r.layer_backwards for r in runs)
        evaluations = sum(r.evaluations for r in runs) / len(runs)
        basis = f"simulated x{a.landscapes}"
        outside = [r.evaluations for r in runs if not bounds.low <= r.evaluations <= bounds.high]
        if outside:  # the settings' bounds are derived from the code the simulation runs: they must hold
            raise AssertionError(f"{cell.id}: simulated evaluations {outside} outside [{bounds.low}, {bounds.high}]")
    tokens, seq = calibration_tokens(grid, cell.objective, a, (measured or {}).get("tokens_per_pass"))
    per_token, head = shape.layer_flops_per_token(seq), shape.head_flops_per_token
    search = tokens * ((expected + 2 * backwards) * per_token + (evaluations + 1) * head)
    search_bound = tokens * ((bound + 2 * backwards) * per_token + (bounds.high + 1) * head)
    shared = tokens * ((n + math.comb(n, 2)) * per_token + (n + 1) * head)  # dense pass + prior from the dense states
    profile = MODELS[cell.model].profile if cell.model in MODELS else "paper"
    ev = eval_tokens(grid, profile)
    evaluation = None if ev is None else ev[0] * ((n - m) * shape.layer_flops_per_token(ev[1]) + head)
    if rate is None:
        assumed = gpu.bf16_tflops * 1e12 * a.mfu * 3600
        hours = (search + (evaluation or 0.0)) / assumed
        hours_bound = (search_bound + (evaluation or 0.0)) / assumed
    else:  # gate-gradient passes (cbo: each L forwards + L backwards) at their own measured rate
        gradient = tokens * 3 * backwards * per_token
        hours = (search - gradient + (evaluation or 0.0)) / rate.forward + gradient / rate.gradient
        hours_bound = (search_bound - gradient + (evaluation or 0.0)) / rate.forward + gradient / rate.gradient
    return CellPlan(
        cell=cell.id, model=cell.model, objective=cell.objective, search=cell.search, budget=m, n_layers=n,
        calibration_tokens=tokens, evaluations=(bounds.low, bounds.high), layer_forwards=expected,
        layer_forwards_range=spread, layer_forwards_bound=bound, layer_backwards=backwards, basis=basis,
        search_tflop=search / 1e12, eval_tflop=None if evaluation is None else evaluation / 1e12,
        shared_tflop=shared / 1e12, gpu_hours=hours, gpu_hours_bound=hours_bound,
        memory=worker_memory(shape, grid, a, gpu, tokens, seq, bounds.energy, m, profile), measured=measured)


def makespan(hours: Iterable[float], gpus: int) -> float:
    """Wall-clock hours of tasks placed longest-first, each on the least loaded of ``gpus`` GPUs."""
    loads = [0.0] * gpus
    heapq.heapify(loads)
    for h in sorted(hours, reverse=True):
        heapq.heappush(loads, heapq.heappop(loads) + h)
    return max(loads)


def plan_grid(grid: Grid, assumptions: Assumptions | None = None, throughput: Throughput | None = None) -> GridPlan:
    """Every cell of ``grid`` planned, with totals, per-task GPU-hours and the warnings that apply.

    ``throughput`` (:func:`~depthprune.plan.throughput.load_throughput`): time from measured rates instead of the assumed MFU.
    """
    a = assumptions or Assumptions()
    if a.gpu not in GPUS:
        raise ValueError(f"gpu {a.gpu!r} is unknown; allowed: {', '.join(GPUS)}")
    if not 0 < a.mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {a.mfu}")
    if a.gpus < 1 or a.landscapes < 1:
        raise ValueError(f"gpus and landscapes must be >= 1, got {a.gpus} and {a.landscapes}")
    gpu = GPUS[a.gpu]
    measured, ratios = _measured_index(a.measured) if a.measured else ({}, {})
    shapes = {m: model_shape(m) for m in sorted({c.model for c in grid.cells()})}  # [[cells]] blocks add models
    for m, shape in shapes.items():
        known = MODELS[m].n_layers if m in MODELS else None
        if known is not None and known != shape.layers:
            raise ValueError(f"{m}: the shape table says {shape.layers} layers, the registry {known}")
    rate = gpu.bf16_tflops * 1e12 * a.mfu * 3600
    rates = {m: Rate(rate, rate) if throughput is None else measured_rate(shape, gpu, throughput)
             for m, shape in shapes.items()}
    cells = []
    runs: dict[tuple, list[Simulated]] = {}  # a landscape depends on the depth only: simulate once per shape
    for cell in grid.cells():
        mine = measured.get(cell.id)
        if mine is not None and mine["n_layers"] != shapes[cell.model].layers:
            mine = None  # measured on a model of another depth: not this cell
        cells.append(plan_cell(grid, cell, shapes[cell.model], a, gpu, mine, ratios, runs,
                               None if throughput is None else rates[cell.model]))
    groups: dict[tuple[str, str], list[CellPlan]] = {}
    for c in cells:
        groups.setdefault((c.model, c.objective), []).append(c)
    dense_eval = {m: next(c for c in cells if c.model == m) for m in shapes}
    dense_hours = {}
    for m, c in dense_eval.items():  # the dense model's evaluation, once per model: L blocks instead of L - M
        dense_hours[m] = (0.0 if c.eval_tflop is None
                          else c.eval_tflop * c.n_layers / (c.n_layers - c.budget) * 1e12 / rates[m].forward)
    run_hours = {k: sum(c.gpu_hours for c in v) - (len(v) - 1) * v[0].shared_tflop * 1e12 / rates[k[0]].forward
                 for k, v in groups.items()}
    per_model = {m: sum(h for (mm, _), h in run_hours.items() if mm == m) + dense_hours[m] for m in shapes}
    per_group = {f"{m}/{o}": h + dense_hours[m] for (m, o), h in run_hours.items()}
    plan = GridPlan(grid.name, a, gpu, shapes, cells)
    if throughput is not None:
        plan.throughput, plan.rates = throughput, rates
        plan.micro_batches = {o: (grid.batch_size, calibration_tokens(grid, o, a)[1]) for o in grid.objectives}
    plan.tasks = {"model": per_model, "objective": per_group}
    alone = sum(c.gpu_hours for c in cells)
    plan.totals = {
        "cells": len(cells),
        "evaluations": [sum(c.evaluations[0] for c in cells), sum(c.evaluations[1] for c in cells)],
        "layer_forwards": sum(c.layer_forwards for c in cells),
        "layer_forwards_bound": sum(c.layer_forwards_bound for c in cells),
        "search_tflop": sum(c.search_tflop for c in cells),
        "eval_tflop": sum(c.eval_tflop or 0.0 for c in cells),
        "gpu_hours_as_if_alone": alone,
        "gpu_hours_bound": sum(c.gpu_hours_bound for c in cells),
        "gpu_hours_grid_run": sum(per_model.values()),
        "wall_hours_per_model": makespan(per_model.values(), a.gpus),
        "wall_hours_per_objective": makespan(per_group.values(), a.gpus),
        "peak_gib_per_worker": {m: max(c.memory.peak for c in cells if c.model == m) for m in shapes},
    }
    plan.totals.update(heal_totals(cells, shapes, a, rates))
    plan.notes = _notes(plan)
    return plan


def heal_totals(cells: Sequence[CellPlan], shapes: Mapping[str, ModelShape], a: Assumptions,
                rates: Mapping[str, Rate]) -> dict[str, Any]:
    """GPU-hours to heal every cell's set and each model's dense control once at ``a.heal_tokens`` (an upper
    bound: cells sharing a set heal it once): per token, the kept blocks and the head forward and backward."""
    hours: dict[str, float] = {}
    for model, shape in shapes.items():
        mine = [c for c in cells if c.model == model]
        kept = [c.n_layers - c.budget for c in mine] + [shape.layers]  # the sets, then the dense control
        per_token = [3 * (k * shape.layer_flops_per_token(256) + shape.head_flops_per_token) for k in kept]
        hours[model] = sum(f * a.heal_tokens for f in per_token) / rates[model].gradient
    return {"heal_tokens": a.heal_tokens, "gpu_hours_heal": sum(hours.values()), "gpu_hours_heal_per_model": hours}


def _notes(plan: GridPlan) -> list[str]:
    notes = []
    gpu = plan.gpu
    for (m, o), c in {(c.model, c.objective): c for c in plan.cells}.items():
        mem = c.memory
        if mem.cache_demand > mem.cache_budget:
            notes.append(f"{m} {o}: the prefix cache wants {mem.cache_demand:.1f} GiB (boundary states of "
                         f"{c.calibration_tokens:,} tokens), its budget is {mem.cache_budget:.1f} GiB: it evicts, so this "
                         "GPU runs more layer-forwards than results count (at most the bound).")
    over: dict[tuple[str, str, str], list[str]] = {}
    for c in plan.cells:
        if c.memory.peak > gpu.memory_gib:
            over.setdefault((c.model, c.memory.phase, f"{c.memory.peak:.1f}"), []).append(c.cell)
    for (_model, phase, peak), ids in over.items():
        notes.append(f"{', '.join(ids)}: estimated peak {peak} GiB ({phase}) exceeds the {gpu.memory_gib:g} GiB "
                     f"of an {gpu.name}.")
    if any(c.eval_tflop is None for c in plan.cells):
        notes.append("evaluation FLOPs are not estimated for profiles whose tasks are not in EVAL_TASKS.")
    n_tasks = len(plan.tasks["objective"])
    if n_tasks < plan.assumptions.gpus:
        notes.append(f"{n_tasks} model x objective tasks leave {plan.assumptions.gpus - n_tasks} of "
                     f"{plan.assumptions.gpus} GPUs idle.")
    return notes

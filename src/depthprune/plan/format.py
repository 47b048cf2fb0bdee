"""A plan as text: the per-cell table, totals, memory per worker, tasks, assumptions and notes."""

from __future__ import annotations

from depthprune.plan.grid_plan import GridPlan


def _span(lo: float, hi: float) -> str:
    return f"{lo:,.0f}" if lo == hi else f"{lo:,.0f}-{hi:,.0f}"


def format_plan(plan: GridPlan) -> str:
    """The plan as text: per-cell table, totals, memory per worker, tasks, assumptions, notes."""
    from depthprune.common.text_tables import markdown_table

    rows = []
    for c in plan.cells:
        lo, hi = c.layer_forwards_range
        rows.append([c.cell, _span(*c.evaluations), f"{c.layer_forwards:,.0f}", _span(lo, hi),
                     f"{c.layer_forwards_bound:,}", c.basis, f"{c.search_tflop:,.0f}",
                     "-" if c.eval_tflop is None else f"{c.eval_tflop:,.0f}", f"{c.gpu_hours:.2f}",
                     f"{c.gpu_hours_bound:.2f}", f"{c.memory.peak:.1f}",
                     "" if not c.measured else f"{c.measured['evaluations']} / {c.measured['layer_forwards']:,}"])
    headers = ["cell", "evals", "layer-fwd", "range", "bound", "basis", "search TFLOP", "eval TFLOP", "GPU-h",
               "GPU-h bound", "peak GiB", "measured evals / fwd"]
    if not any(c.measured for c in plan.cells):
        headers, rows = headers[:-1], [r[:-1] for r in rows]
    t = plan.totals
    a = plan.assumptions
    pace = (f"{a.mfu:.0%} MFU" if plan.throughput is None else
            f"measured throughput ({plan.throughput.file}: {plan.throughput.gpu}, {plan.throughput.date})")
    out = [f"plan for grid {plan.grid}: {t['cells']} cells on {a.gpus} x {plan.gpu.name} at {pace}", "",
           markdown_table(rows, headers), ""]
    totals = [
        ["evaluations", _span(*t["evaluations"])],
        ["layer-forwards (expected / bound)", f"{t['layer_forwards']:,.0f} / {t['layer_forwards_bound']:,}"],
        ["search / evaluation TFLOP", f"{t['search_tflop']:,.0f} / {t['eval_tflop']:,.0f}"],
        ["GPU-hours, cells as if alone (as results report)", f"{t['gpu_hours_as_if_alone']:.1f}"],
        ["GPU-hours, cells as if alone, bound", f"{t['gpu_hours_bound']:.1f}"],
        ["GPU-hours, this grid run (dense pass + prior once per condition)", f"{t['gpu_hours_grid_run']:.1f}"],
        [f"wall-clock h on {a.gpus} GPUs, one task per model", f"{t['wall_hours_per_model']:.1f}"],
        [f"GPU-hours to heal every cell's set and the dense models at {t['heal_tokens'] / 1e6:.0f} M tokens "
         "(the peers' budget; bound)", f"{t['gpu_hours_heal']:.1f}"],
        [f"wall-clock h on {a.gpus} GPUs, one task per model x objective", f"{t['wall_hours_per_objective']:.1f}"],
    ]
    out += [markdown_table(totals, ["total", "value"]), ""]
    mem_rows = []
    for model, shape in plan.shapes.items():
        worst = max((c for c in plan.cells if c.model == model), key=lambda c: c.memory.peak)
        mm = worst.memory
        mem_rows.append([model, f"{shape.params / 1e9:.2f}B", f"{mm.weights:.1f}", f"{mm.cache_budget:.1f}",
                         f"{mm.cache_demand:,.0f}", f"{mm.in_flight:.1f} ({mm.phase})", f"{mm.peak:.1f}", worst.cell])
    out += ["memory per worker (GiB; the cell with the highest peak)",
            markdown_table(mem_rows, ["model", "params", "weights", "prefix cache (its budget)", "cache demand",
                                        "in flight", "peak", "at"]), ""]
    task_rows = [[split, name, f"{h:.1f}"] for split, tasks in plan.tasks.items() for name, h in tasks.items()]
    out += [markdown_table(task_rows, ["task per", "task", "GPU-h"]), ""]
    out += ["assumptions:"] + [f"  - {line}" for line in plan.assumption_text()]
    out += [f"  - shapes: {s.model} {s.layers} layers, hidden {s.hidden}, MLP {s.intermediate}, heads {s.heads}/"
            f"{s.kv_heads} kv, vocab {s.vocab} ({s.source})" for s in plan.shapes.values()]
    if plan.notes:
        out += ["", "notes:"] + [f"  - {n}" for n in plan.notes]
    return "\n".join(out)

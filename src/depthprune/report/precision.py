"""Numeric precision as a reported axis: every bf16 cell against the float32 reference of the same cell.

The CPU grids ran in float32 until bf16 became `auto` on AMX CPUs; their last float32 run is kept
as measured references in `reference/float32/` (removed set, calibration loss, every metric; written
by `--update-reference` from that run). This is the precision control: for each grid it counts the
cells whose removed set changed (and how many of those are near ties by the grid's own tolerance),
how far calibration losses and metrics moved, and whether a claim's verdict flips when the float32
cells stand in for the bf16 ones. Claims that need more than a reference keeps (the cost, the search
trace, the prior: search-cost, search-convergence, 3.3) are not re-judged, and say so. Whether the
"redundant" blocks depend on numeric precision is a question the paper could not ask.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from depthprune.common.text_tables import markdown_table
from depthprune.grid.reference import read_reference
from depthprune.model.precision import dtype_name
from depthprune.report.cells import fmt, layers
from depthprune.report.controls import is_control
from depthprune.results.schema import Result


def from_references() -> tuple[str, ...]:
    """The claims whose statistics read only what a reference keeps (``Claim.reads_only_references``)."""
    from depthprune.report.claims import CLAIMS

    return tuple(sorted(c.id for c in CLAIMS.values() if c.reads_only_references))


def _dtype(r: Result) -> str:
    return dtype_name((r.get("environment") or {}).get("dtype", ""))


def pairs(results: Sequence[Result], ref_dir: str | Path) -> dict[str | None, list[tuple[Result, dict]]]:
    """grid -> [(bf16 result, its float32 reference)] for every bf16 cell that has one."""
    out: dict[str | None, list[tuple[Result, dict]]] = defaultdict(list)
    for r in results:
        if _dtype(r) != "bfloat16":
            continue
        ref = read_reference(ref_dir, r["cell"], "float32")
        if ref is not None and ref.get("kind") == "measured":
            out[r.identity.grid].append((r, ref))
    return dict(out)


def float32_view(rows: Sequence[Result], refs: dict[str, dict[str, Any]]) -> list[Result]:
    """The rows as the float32 run had them: removed set, calibration loss and metrics from the
    references; per-item outcomes dropped (references keep none)."""
    view = []
    for r in rows:
        ref = refs.get(r["cell"])
        if ref is None:
            continue
        view.append(r.replace(drop=["item_outcomes"], removed=ref["removed"],
                              calibration_loss=ref["calibration_loss"], metrics=ref["metrics"]))
    return view


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else math.inf


def _spread(values: list[float], digits: int = 2, scale: float = 1.0, unit: str = "") -> str:
    if not values:
        return "–"
    v = np.array(values) * scale
    return f"{np.median(v):.{digits}g}{unit} / {v.max():.{digits}g}{unit}"


def grid_rows(grid_pairs: list[tuple[Result, dict]]) -> list[Any]:
    same = [(r, f) for r, f in grid_pairs if sorted(r["removed"]) == sorted(f["removed"])]
    moved = [(r, f) for r, f in grid_pairs if sorted(r["removed"]) != sorted(f["removed"])]
    near = [(r, f) for r, f in moved
            if _rel(r["calibration_loss"], f["calibration_loss"]) <= f.get("tolerance", {}).get("near_tie_rel", 1e-3)]
    acc = [abs(r["metrics"]["avg_acc"] - f["metrics"]["avg_acc"]) for r, f in same
           if "avg_acc" in r["metrics"] and "avg_acc" in f["metrics"]]
    ppl = [_rel(r["metrics"]["c4_ppl"], f["metrics"]["c4_ppl"]) for r, f in same
           if "c4_ppl" in r["metrics"] and "c4_ppl" in f["metrics"]]
    def dloss(pairs_):  # nats: a margin loss can sit near 0, where a relative change means nothing
        return [abs(r["calibration_loss"] - f["calibration_loss"]) for r, f in pairs_]

    return [len(grid_pairs), f"{len(moved)} ({len(near)} near ties)", _spread(dloss(same)), _spread(dloss(moved)),
            _spread(acc, scale=100, unit=" pt"), _spread(ppl, scale=100, unit="%")]


def verdict_changes(grid_pairs: list[tuple[Result, dict]], all_rows: Sequence[Result]) -> list[list[str]]:
    """[claim, bf16 outcome, float32 outcome, flipped?] for the claims judged from references."""
    from depthprune.report.claims import judge_all

    refs = {r["cell"]: f for r, f in grid_pairs}
    rows = [r for r in all_rows if r["cell"] in refs]
    bf16 = {v.claim.id: v for v in judge_all(rows)}
    fp32 = {v.claim.id: v for v in judge_all(float32_view(rows, refs))}
    out = []
    for claim in from_references():
        a, b = bf16.get(claim), fp32.get(claim)
        if a is None or b is None:
            continue
        flipped = "no" if a.outcome == b.outcome else "**yes**"
        out.append([claim, a.outcome, b.outcome, flipped])
    return out


def render_precision(results: Sequence[Result], ref_dir: str | Path) -> list[str]:
    found = pairs(results, ref_dir)
    if not found:
        return []
    lines = [__doc__.split("\n\n")[1].replace("\n", " "), "",
             "Per grid: cells with a float32 reference; cells whose removed set differs in bf16 (near ties: "
             "calibration losses within the grid's near-tie tolerance); |Δ calibration loss|, median / "
             "max, in nats, on the cells whose set is unchanged and on those whose set moved; |Δ avg acc| and relative "
             "|Δ c4 ppl| on unchanged sets (the same pruned model evaluated in both precisions).", ""]
    table = [[grid, *grid_rows(p)] for grid, p in sorted(found.items())]
    lines += [markdown_table(table, ["grid", "cells", "sets changed", "Δ loss (same set)", "Δ loss (set moved)",
                                       "Δ avg acc (same set)", "Δ c4 ppl (same set)"], numparse=True), ""]
    flips, judged = [], []
    for grid, p in sorted(found.items()):
        grid_rows_ = [r for r in results if r.identity.grid == grid]
        if any(is_control(r) for r in grid_rows_):
            continue  # a controls grid's verdicts are the main grid's, re-judged in its own section
        for claim, a, b, flipped in verdict_changes(p, grid_rows_):
            judged.append([grid, claim, a, b, flipped])
            if flipped != "no":
                flips.append(f"{grid} {claim}")
    lines += ["Claim verdicts of each main grid with the float32 cells in place of the bf16 ones (the claims judged from what a "
              f"reference keeps: {', '.join(from_references())}; search-cost, search-convergence and 3.3 need costs, "
              "traces and priors that references do not keep, and are not re-judged):", "",
              markdown_table(judged, ["grid", "claim", "bf16", "float32", "flipped"], numparse=True), ""]
    moved = [[r["cell"], layers(f["removed"]), layers(r["removed"]), fmt(f["calibration_loss"], 4),
              fmt(r["calibration_loss"], 4)]
             for p in found.values() for r, f in p if sorted(r["removed"]) != sorted(f["removed"])]
    if moved:
        lines += ["The cells whose removed set moved:", "",
                  markdown_table(moved, ["cell", "float32 set", "bf16 set", "float32 loss", "bf16 loss"], numparse=True), ""]
    total = sum(len(p) for p in found.values())
    lines += [f"**Finding:** {len(moved)} of {total} cells ({100 * len(moved) / total:.1f}%) removed a different set "
              "in bf16 than in float32; "
              + (f"verdicts flipped: {', '.join(flips)}." if flips else "no claim verdict flipped."), ""]
    return lines

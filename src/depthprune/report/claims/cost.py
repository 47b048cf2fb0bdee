"""The premise: depth pruning cuts inference cost about in proportion to the blocks removed.

Depth pruning is worth studying because removing blocks makes a model cheaper to run; the paper says so
twice, and never measures it. inference-cost measures it, on the rebuilt smaller model of every evaluated
cell (``depthprune speed --results … --grid …``, an archive file the report attaches to each result as
``speed``): per cell, r = measured speedup ÷ L/(L − M), for prefill at the long context and for decode,
both at batch 1. The rule was fixed before any speed result was read (DESIGN.md, "What pruning buys").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.results.schema import Result

INTRODUCTION = ("depth pruning removes entire Transformer blocks, reducing inference cost approximately "
                "proportionally to the number of removed layers")

#: the two workloads, by the prefix of their name in a speed archive (their context is the model's)
WORKLOADS = {"prefill": "prefill b1 ", "decode": "decode b1 "}


def ratios(r: Mapping[str, Any], workload: str) -> list[float] | None:
    """Each timing round's measured speedup of the cell's rebuilt model ÷ L/(L − M); None where not measured."""
    speed = r.get("speed") or {}
    prefix = WORKLOADS[workload]
    measured = next((v for k, v in (speed.get("measured") or {}).items() if k.startswith(prefix)), None)
    blocks_only = (speed.get("predicted") or {}).get("blocks_only")
    if measured is None or not blocks_only or not (measured.get("speedup") or {}).get("rounds"):
        return None
    return [float(x) / float(blocks_only) for x in measured["speedup"]["rounds"]]


#: _bootstrap's draws by their inputs (the ratios' values, the size and the seed), read-only: a report judges the
#: claim again for each threshold of its sensitivity and each firmness re-judgement, on the same ratios, and a
#: Python loop of n_resamples draws is the claim's whole cost; at most BOOTSTRAPS_KEPT, oldest out
_BOOTSTRAPS: dict[tuple[Any, ...], np.ndarray] = {}
BOOTSTRAPS_KEPT = 64


def _bootstrap(per_cell: Sequence[Sequence[float]], n_resamples: int, seed: int) -> np.ndarray:
    """:func:`_draw`, computed once per distinct input: the same seeded draws, the same bits."""
    key = (tuple(tuple(float(x).hex() for x in rs) for rs in per_cell), int(n_resamples), int(seed))  # -0.0 too
    if key not in _BOOTSTRAPS:
        boot = _draw(per_cell, n_resamples, seed)
        boot.flags.writeable = False  # shared from now on: a caller that wrote into it would raise
        if len(_BOOTSTRAPS) >= BOOTSTRAPS_KEPT:
            del _BOOTSTRAPS[next(iter(_BOOTSTRAPS))]
        _BOOTSTRAPS[key] = boot
    return _BOOTSTRAPS[key]


def _draw(per_cell: Sequence[Sequence[float]], n_resamples: int, seed: int) -> np.ndarray:
    """The median of r over cells, resampled: cells with replacement, and one timing round of each."""
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    for i in range(n_resamples):
        picks = rng.integers(0, len(per_cell), len(per_cell))
        out[i] = np.median([per_cell[k][rng.integers(0, len(per_cell[k]))] for k in picks])
    return out


@register(Claim(
    "inference-cost", "Introduction", "Introduction, first paragraph (and Related work: \"with inference cost "
    "scaling approximately with the number of retained layers\")", INTRODUCTION,
    "per evaluated cell with a speed measurement: r = measured speedup of the rebuilt model ÷ L/(L − M), for "
    "long-context prefill and for decode at batch 1; the median over cells, its interval a bootstrap over cells "
    "and timing rounds; both intervals within 1 ± tolerance", "tolerance",
    ("tolerance", "n_resamples", "seed", "confidence"),
    gist="cost falls in proportion to blocks removed",
    rules=(Rule("prefill", "tolerance", "CI within 1 ± {}"), Rule("decode", "tolerance", "CI within 1 ± {}"))))
def judge_inference_cost(grid: str, rows: list[Result], t: Mapping[str, Any],
                         g: Mapping[str, Any]) -> Verdict:
    """Measured speedup against the blocks-only prediction, where the grid's speed archive measured it:
    a head and an embedding that stay make a pruned model less than L/(L − M) faster."""
    th = {"tolerance": t["tolerance"]}
    stat: dict[str, float | None] = {}
    decided: list[bool | None] = []
    details: list[dict[str, Any]] = []
    used = [r for r in rows if r.get("removed") and ratios(r, "prefill") is not None]
    for workload in WORKLOADS:
        per_cell = [rs for rs in (ratios(r, workload) for r in used) if rs]
        if not per_cell:
            stat[workload] = None
            decided.append(None)
            continue
        boot = _bootstrap(per_cell, t["n_resamples"], t["seed"])
        low, high = helpers.interval(boot, t["confidence"])
        value = float(np.median([np.median(rs) for rs in per_cell]))
        stat.update({workload: value, f"{workload}_low": low, f"{workload}_high": high})
        decided.append(helpers.decide(low - 1.0, high - 1.0, t["tolerance"], "within"))
        details.append({"workload": workload, "cells": len(per_cell), "median_r": value, "low": low, "high": high})
    if not used:
        why = ("its speed archive records no per-round ratios (made before they were recorded): re-run "
               if any(r.get("speed") for r in rows) else "no speed measurement of its cells: ")
        return verdict("inference-cost", grid, None, {"prefill": None, "decode": None}, th, 0, 0,
                       f"grid {grid}: {why}depthprune speed --results DIR --grid {grid}")
    held = False if False in decided else None if None in decided else True
    words = "; ".join(f"{w} r = {helpers.fmt(stat[w])} [{helpers.fmt(stat.get(f'{w}_low'))}, {helpers.fmt(stat.get(f'{w}_high'))}]"
                      for w in WORKLOADS if stat.get(w) is not None)
    why = {True: "both within", False: "outside", None: "the timing noise cannot decide"}[held]
    return verdict("inference-cost", grid, held, stat, th, len(used), helpers.distinct(used),
                   f"measured speedup ÷ L/(L − M): {words}; 1 ± {t['tolerance']}: {why}", details)

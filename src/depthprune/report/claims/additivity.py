"""Section 3.3: removing several layers is not the sum of removing each.

The limitations section says "Section 3.3 demonstrates the non-additivity of multi-layer
removal"; one-shot pruning assumes additivity, so this is the claim that search is needed at
all. It reads the sets the searchers evaluated (their traces) against the single-removal prior.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.results.schema import Result


@register(Claim(
    "3.3", "3.3", "Limitations, third", "Section 3.3 demonstrates the non-additivity of multi-layer removal",
    "per (model, objective), over the traces' distinct sets of ≥ 2 layers: mean |loss − additive "
    "prediction| ÷ mean |loss − dense|, additive prediction = dense + Σ_i (f({i}) − dense); "
    "median ≥ min_rel_error", "min_rel_error", ("min_sets", "set_error", "min_rel_error"),
    gist="multi-layer removal is not additive",
    rules=(Rule("rel_error", "min_rel_error", "≥ {}"),)))
def judge_3_3(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """Removing several layers is not the sum of removing each: the additive prediction from the
    single-removal prior misses the true loss of the sets the searchers evaluated. The error is
    relative to the mean ``|change from dense|`` (a margin loss may fall when layers go, so the
    signed increase can be near zero). The Spearman of prediction and truth says whether the
    additive model still ranks sets well (which is all one-shot needs)."""
    groups: dict[tuple[str, str], list[Result]] = defaultdict(list)
    for r in rows:
        groups[(r.identity.model, r.identity.objective)].append(r)
    details: list[dict[str, Any]] = []
    n_sets, most = 0, 0
    for (model, objective), rs in sorted(groups.items()):
        prior = next((r["prior"] for r in rs if r.get("prior")), None)
        dense = next((r["dense_calibration_loss"] for r in rs if r.get("dense_calibration_loss") is not None), None)
        if prior is None or dense is None:
            continue
        sets: dict[frozenset[int], float] = {}
        for r in rs:
            for removed, loss in r.get("trace") or []:
                s = frozenset(removed)
                if len(s) >= 2 and loss is not None and math.isfinite(loss) and all(prior[i] is not None for i in s):
                    sets.setdefault(s, float(loss))
        most = max(most, len(sets))
        if len(sets) < t["min_sets"]:
            continue
        true = np.array(list(sets.values()))
        pred = np.array([dense + sum(prior[i] - dense for i in s) for s in sets])
        err, change = np.abs(true - pred), float(np.mean(np.abs(true - dense)))
        rel = float(np.mean(err)) / change if change > 0 else math.nan
        share = float(np.mean(err > t["set_error"] * change)) if change > 0 else math.nan
        details.append({"model": model, "objective": objective, "sets": len(sets), "rel_error": rel,
                        "share_over_set_error": share, "spearman": helpers.spearman(pred, true)})
        n_sets += len(sets)
    details = [d for d in details if math.isfinite(d["rel_error"])]
    th = {k: t[k] for k in ("min_sets", "set_error", "min_rel_error")}
    if not details:
        return verdict("3.3", grid, None, {"rel_error": None}, th, 0, 0,
                       f"no (model, objective) with a prior, a dense loss and ≥ {t['min_sets']} evaluated sets of "
                       f"≥ 2 layers in the traces (most: {most})")
    rel = helpers.median(d["rel_error"] for d in details)
    held = rel >= t["min_rel_error"]
    stat = {"rel_error": rel, "share_over_set_error": helpers.median(d["share_over_set_error"] for d in details),
            "spearman": helpers.median(d["spearman"] for d in details)}
    return verdict("3.3", grid, held, stat, th, len(details), sum(d["sets"] for d in details),
                   f"median |true − additive| ÷ mean |change| {rel:.2f} {'≥' if held else '<'} "
                   f"{t['min_rel_error']}", details)

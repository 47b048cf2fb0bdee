"""Section 5.1: the calibration configuration, not the searcher, reshapes the removed sets.

Three claims from the introduction's first observation: sets overlap less across objectives
than across searchers within one (5.1a); ppl removals come in runs of adjacent blocks, margin
removals are "more distributed" (5.1b-contiguity); and ppl removals sit mid-to-late
(5.1b-depth). Each is a median over the grid's pairs (or ppl conditions) of an overlap statistic
from :mod:`depthprune.report.analysis`, compared with one threshold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from depthprune.report import analysis
from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.results.schema import Result

OBSERVATION_5_1 = "calibration configurations reshape the resulting sets of pruned layers (Section 5.1)"
PATTERN_5_1 = ("perplexity-based pruning concentrates on contiguous mid-to-late layers, whereas task "
               "likelihood margin pruning produces more distributed removal patterns")


@register(Claim(
    "5.1a", "5.1", "Introduction, observation (i)", OBSERVATION_5_1,
    "median over pairs of [mean within-objective pairwise Jaccard across searchers − mean Jaccard of the "
    "same searcher's ppl and margin sets] ≥ min_gap", "min_gap", ("min_gap",),
    reads_only_references=True,
    gist="the objective, not the searcher, picks layers", reads_evaluation=False,
    rules=(Rule("gap", "min_gap", "≥ {}"),)))
def judge_5_1a(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """Sets overlap less across objectives than across searchers within one: the configuration,
    not the searcher, decides which layers go."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    for (model, budget), (ppl, margin) in helpers.pairs(rows, g).items():
        common = sorted(set(ppl) & set(margin))
        if len(common) < g["min_searchers"]:
            continue
        within = float(np.mean([analysis.mean_pairwise_jaccard([side[s]["removed"] for s in common])
                                for side in (ppl, margin)]))
        across = float(np.mean([analysis.jaccard(ppl[s]["removed"], margin[s]["removed"]) for s in common]))
        details.append({"model": model, "budget": budget, "searchers": len(common), "within": within,
                        "across": across, "gap": within - across})
        used += [ppl[s] for s in common] + [margin[s] for s in common]
    th = {"min_gap": t["min_gap"]}
    if not details:
        return verdict("5.1a", grid, None, {"gap": None}, th, 0, 0,
                       f"no (model, budget) with both objectives and ≥ {g['min_searchers']} common searchers")
    gap = helpers.median(d["gap"] for d in details)
    held = gap >= t["min_gap"]
    return verdict("5.1a", grid, held, {"gap": gap}, th, len(details), helpers.distinct(used),
                   f"median within − across Jaccard {gap:.2f} {'≥' if held else '<'} {t['min_gap']}", details)


@register(Claim(
    "5.1b-contiguity", "5.1", "Introduction, first observation", PATTERN_5_1,
    "median over pairs of [mean contiguity of ppl removals − of margin removals] ≥ min_gap",
    "min_gap", ("min_gap",),
    reads_only_references=True,
    gist="ppl removes runs, margin scattered layers", reads_evaluation=False, rules=(Rule("gap", "min_gap", "≥ {}"),)))
def judge_5_1b_contiguity(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """ppl removals come in runs of adjacent blocks, margin removals less so ("more distributed")."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    for (model, budget), (ppl, margin) in helpers.pairs(rows, g).items():
        c = {name: float(np.mean([analysis.contiguity(r["removed"]) for r in side.values()]))
             for name, side in (("ppl", ppl), ("margin", margin))}
        details.append({"model": model, "budget": budget, "contiguity_ppl": c["ppl"],
                        "contiguity_margin": c["margin"], "gap": c["ppl"] - c["margin"]})
        used += [*ppl.values(), *margin.values()]
    th = {"min_gap": t["min_gap"]}
    if not details:
        return verdict("5.1b-contiguity", grid, None, {"gap": None}, th, 0, 0,
                       "no (model, budget) with both objectives")
    gap = helpers.median(d["gap"] for d in details)
    held = gap >= t["min_gap"]
    return verdict("5.1b-contiguity", grid, held, {"gap": gap}, th, len(details), helpers.distinct(used),
                   f"median contiguity ppl − margin {gap:.2f} {'≥' if held else '<'} {t['min_gap']}", details)


@register(Claim(
    "5.1b-depth", "5.1", "Introduction, first observation", PATTERN_5_1,
    "median over (model, budget) of the mean relative depth of ppl removals ≥ min_depth",
    "min_depth", ("min_depth",),
    reads_only_references=True,
    gist="ppl removes mid-to-late layers", reads_evaluation=False, rules=(Rule("depth", "min_depth", "≥ {}"),)))
def judge_5_1b_depth(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """ppl removals sit in the second half of the network ("mid-to-late")."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    for (model, objective, budget), by_search in helpers.conditions(rows).items():
        if objective != g["ppl_objective"]:
            continue
        depth = float(np.mean([analysis.relative_depth(r["removed"], r["n_layers"]) for r in by_search.values()]))
        details.append({"model": model, "budget": budget, "depth": depth})
        used += by_search.values()
    th = {"min_depth": t["min_depth"]}
    if not details:
        return verdict("5.1b-depth", grid, None, {"depth": None}, th, 0, 0, f"no {g['ppl_objective']} results")
    depth = helpers.median(d["depth"] for d in details)
    held = depth >= t["min_depth"]
    return verdict("5.1b-depth", grid, held, {"depth": depth}, th, len(details), helpers.distinct(used),
                   f"median relative depth of ppl removals {depth:.2f} {'≥' if held else '<'} {t['min_depth']}",
                   details)

"""The second contribution and the conclusion: search gains little, costs much, and converges.

"Computationally expensive search algorithms yield marginal improvements over simple one-shot
pruning": search-gain measures the improvement against what changing the configuration does,
search-cost the expense against one-shot's. search-convergence tests the conclusion's "different
search algorithms converge to similar pruned subsets" under one configuration.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import numpy as np

from depthprune.report import analysis
from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.results.schema import Result

CONTRIBUTION_2 = ("we show that computationally expensive search algorithms yield marginal improvements over "
                  "simple one-shot pruning in calibration perplexity")


@register(Claim(
    "search-gain", "Contributions", "Introduction, second contribution", CONTRIBUTION_2,
    "per ppl condition: the largest calibration-loss gain of a searcher over one-shot (nats = log "
    "calibration perplexity) ÷ the objective gap (mean over searchers of log C4 ppl of the margin-chosen "
    "minus the ppl-chosen solution, same model and budget); the median's interval over the C4 windows' "
    "noise ≤ max_ratio", "max_ratio", ("max_ratio", "n_resamples", "seed", "confidence", "power"),
    reads_only_references=True,
    gist="search gains little over one-shot",
    rules=(Rule("ratio", "max_ratio", "CI high ≤ {}"),)))
def judge_search_gain(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """Search buys little calibration perplexity next to what changing the configuration does.
    Both gaps are in log perplexity on C4: the search gain in the ppl objective's own loss (mean
    NLL on the calibration windows), the objective gap in evaluated log C4 perplexity; only ppl
    conditions, since only there the calibration loss is a perplexity.

    The gain is in the calibration loss (exact for its calibration set); the objective gap is in
    evaluated log C4 perplexity, whose window noise is resampled: the median ratio's interval decides."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    groups: list[tuple[float, list[Result]]] = []
    for (model, budget), (ppl, margin) in helpers.pairs(rows, g).items():
        if g["oneshot"] not in ppl or len(ppl) < 2:
            continue
        gains = {s: ppl[g["oneshot"]]["calibration_loss"] - r["calibration_loss"]
                 for s, r in ppl.items() if s != g["oneshot"]}
        both = sorted(s for s in set(ppl) & set(margin)
                      if helpers.metric(ppl[s], "c4_ppl") is not None and helpers.metric(margin[s], "c4_ppl") is not None)
        if not both:
            continue
        gaps = [math.log(helpers.known(margin[s], "c4_ppl")) - math.log(helpers.known(ppl[s], "c4_ppl")) for s in both]
        gain, gap = max(gains.values()), float(np.mean(gaps))
        ratio = gain / gap if gap > 0 else math.inf  # no objective gap: search gains cannot be small next to it
        details.append({"model": model, "budget": budget, "largest_gain": gain,
                        "best_searcher": max(gains, key=lambda s: gains[s]), "objective_gap": gap, "ratio": ratio,
                        "gains": gains})
        groups.append((gain, [margin[s] for s in both] + [ppl[s] for s in both]))
        used += [*ppl.values(), *(margin[s] for s in both)]
    th = {"max_ratio": t["max_ratio"], "confidence": t["confidence"], "power": t["power"]}
    if not details:
        return verdict("search-gain", grid, None, {"ratio": None}, th, 0, 0,
                       f"no (model, budget) with {g['oneshot']} and another searcher under ppl and c4_ppl "
                       "evaluated under both objectives")
    ratio = helpers.median(d["ratio"] for d in details)
    if any(helpers.blocks(sols, "c4_ppl") is None for _, sols in groups):
        return verdict("search-gain", grid, None, {"ratio": ratio}, th, len(details), helpers.distinct(used),
                       f"median ratio {ratio:.2f}, but no per-window outcomes, so the objective gap's noise is "
                       "unknown: not measured", details)
    _, boot = helpers.measured_groups([sols for _, sols in groups], "c4_ppl", t["n_resamples"], t["seed"])
    ratios = []
    for (gain, sols), (means, _) in zip(groups, boot):
        half = len(sols) // 2  # margin-chosen first, then ppl-chosen, searcher by searcher
        gap_b = (means[:, :half] - means[:, half:]).mean(1)  # mean window NLL = log perplexity
        with np.errstate(divide="ignore"):
            ratios.append(np.where(gap_b > 0, gain / gap_b, np.inf))
    draws = np.median(np.array(ratios), axis=0)
    low, high = helpers.interval(draws, t["confidence"])
    mde = helpers.mde(draws, t)
    held = helpers.decide(low, high, t["max_ratio"], "<=")
    word = {True: "marginal", False: "not marginal", None: "not measured"}[held]
    return verdict("search-gain", grid, held, {"ratio": ratio, "ratio_low": low, "ratio_high": high,
                                                "ratio_mde": mde}, th, len(details), helpers.distinct(used),
                   f"median (largest search gain ÷ objective gap) {ratio:.2f} [{low:.2f}, {high:.2f}] vs ≤ "
                   f"{t['max_ratio']} (MDE {mde:.2f}): {word}", details)


def _cost(r: Result, measure: str) -> float:
    c = r["cost"]
    if measure == "layer_passes":  # a backward pass counted as one more pass over the block
        return float(c["layer_forwards"] + c.get("layer_backwards", 0))
    return float(c[measure])



@register(Claim(
    "search-cost", "Contributions", "Introduction, second contribution", CONTRIBUTION_2,
    "the 'computationally expensive' part: cost (measure) of each expensive searcher ÷ one-shot's in the "
    "same condition, both as if alone with the prior included; median ≥ min_ratio", "min_ratio",
    ("expensive", "measure", "min_ratio"),
    gist="expensive searchers cost many × one-shot", reads_evaluation=False, rules=(Rule("ratio", "min_ratio", "≥ {}"),)))
def judge_search_cost(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """The searchers the text calls computationally expensive cost many times one-shot. Costs are
    as if each searcher ran alone, prior included for every searcher that uses it (one-shot does),
    so the ratio compares like with like. ``measure``: layer_forwards (default, machine-independent),
    layer_passes (+ backwards, for gradient searchers) or seconds. The v1 summary's "minutes …
    hours" is v1 summary (``000_…``), not in the paper's text, and is not judged."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    ratios: list[float] = []
    seconds_ratios: list[float] = []
    per_searcher: dict[str, list[float]] = defaultdict(list)
    for (model, objective, budget), by_search in helpers.conditions(rows).items():
        base = by_search.get(g["oneshot"])
        dear = {s: r for s, r in by_search.items() if s in t["expensive"]}
        if base is None or not dear or _cost(base, t["measure"]) <= 0:
            continue
        row: dict[str, Any] = {"model": model, "objective": objective, "budget": budget}
        for s, r in dear.items():
            row[s] = _cost(r, t["measure"]) / _cost(base, t["measure"])
            seconds = base["cost"]["seconds"]
            row[f"{s}_seconds"] = r["cost"]["seconds"] / seconds if seconds else math.nan
            ratios.append(row[s])
            per_searcher[s].append(row[s])
            seconds_ratios.append(row[f"{s}_seconds"])
        details.append(row)
        used += [base, *dear.values()]
    th = {k: t[k] for k in ("expensive", "measure", "min_ratio")}
    if not details:
        return verdict("search-cost", grid, None, {"ratio": None}, th, 0, 0,
                       f"no condition with {g['oneshot']} and one of {', '.join(t['expensive'])}")
    ratio = helpers.median(ratios)
    held = ratio >= t["min_ratio"]
    stat = {"ratio": ratio, **{s: helpers.median(v) for s, v in per_searcher.items()},
            "seconds ratio": float(np.nanmedian(seconds_ratios)) if not np.all(np.isnan(seconds_ratios)) else None}
    return verdict("search-cost", grid, held, stat, th, len(details), helpers.distinct(used),
                   f"median {t['measure']} ratio to {g['oneshot']} {ratio:.1f}× {'≥' if held else '<'} "
                   f"{t['min_ratio']}×", details)


@register(Claim(
    "search-convergence", "Conclusion", "Conclusion",
    "under a fixed calibration configuration, different search algorithms converge to similar pruned "
    "subsets",
    "median over conditions of the mean pairwise Jaccard of the searchers' removed sets ≥ min_jaccard",
    "min_jaccard", ("min_jaccard",),
    gist="searchers converge to similar sets", reads_evaluation=False, rules=(Rule("jaccard", "min_jaccard", "≥ {}"),)))
def judge_search_convergence(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """Under one configuration the searchers agree on which layers to remove."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    for (model, objective, budget), by_search in helpers.conditions(rows).items():
        if len(by_search) < g["min_searchers"]:
            continue
        overlap = analysis.mean_pairwise_jaccard([r["removed"] for r in by_search.values()])
        details.append({"model": model, "objective": objective, "budget": budget, "searchers": len(by_search),
                        "jaccard": overlap})
        used += by_search.values()
    th = {"min_jaccard": t["min_jaccard"]}
    if not details:
        return verdict("search-convergence", grid, None, {"jaccard": None}, th, 0, 0,
                       f"no condition with ≥ {g['min_searchers']} searchers")
    overlap = helpers.median(d["jaccard"] for d in details)
    held = overlap >= t["min_jaccard"]
    return verdict("search-convergence", grid, held, {"jaccard": overlap}, th, len(details), helpers.distinct(used),
                   f"median pairwise Jaccard within a condition {overlap:.2f} {'≥' if held else '<'} "
                   f"{t['min_jaccard']}", details)

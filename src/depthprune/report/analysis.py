"""The numbers behind REPORT.md: correlations, overlaps, variance shares, claim verdicts.

Pure functions of cell results (dicts as written by the grid runner), so the reporter
can merge results from any number of machines and every figure in the report can be
recomputed from the JSON files alone.

Conventions (stated in the report too):
* a *condition* is (grid, model, objective, budget); its *solutions* are the searchers'
  results in it;
* accuracy = ``avg_acc`` (mean headline metric of the six zero-shot tasks);
* alignment ρ = Spearman(−calibration loss, accuracy) across a condition's solutions:
  positive means the solution that calibrates better also scores higher accuracy.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
from scipy import stats

MIN_DISTINCT_FOR_SPEARMAN = 5


def searcher_rank(name: str) -> tuple[int, str]:
    """Table order: each registered searcher's ``order`` (cheap to dear), unknown names last."""
    from depthprune.search import SEARCHERS

    cls = SEARCHERS.get(name)
    return (cls.order if cls is not None else 1 << 30, name)


Condition = tuple[str, str, str, int]  # grid, model, objective, budget


def by_condition(results: Iterable[dict[str, Any]]) -> dict[Condition, list[dict[str, Any]]]:
    out: dict[Condition, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        out[(r["grid"], r["model"], r["objective"], r["budget"])].append(r)
    for rows in out.values():
        rows.sort(key=lambda r: (searcher_rank(r["search"]), r["search"], r["search_seed"], r["variant"]))
    return dict(sorted(out.items()))


def jaccard(a: Sequence[int], b: Sequence[int]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 1.0


def mean_pairwise_jaccard(sets: Sequence[Sequence[int]]) -> float:
    pairs = list(combinations(sets, 2))
    return float(np.mean([jaccard(a, b) for a, b in pairs])) if pairs else math.nan


def contiguity(removed: Sequence[int]) -> float:
    """Share of removed layers that have a removed neighbour (1.0 = all in runs of ≥ 2)."""
    s = set(removed)
    if not s:
        return math.nan
    return sum(1 for i in s if i - 1 in s or i + 1 in s) / len(s)


def relative_depth(removed: Sequence[int], n_layers: int) -> float:
    """Mean position of the removed layers, 0 = first block, 1 = last."""
    return float(np.mean([i / (n_layers - 1) for i in removed])) if removed and n_layers > 1 else math.nan


@dataclass
class Correlation:
    rho: float
    p_value: float
    ci_low: float
    ci_high: float
    n: int
    distinct: int
    note: str = ""


def alignment(rows: Sequence[dict[str, Any]], metric: str = "avg_acc", seed: int = 0) -> Correlation | None:
    """Spearman(−calibration loss, accuracy) with a paired bootstrap 95% interval."""
    pts = [(-r["calibration_loss"], r["metrics"].get(metric)) for r in rows]
    pts = [(x, y) for x, y in pts if y is not None and math.isfinite(x) and math.isfinite(y)]
    if len(pts) < 3:
        return None
    x, y = np.array(pts).T
    distinct = len({tuple(sorted(r["removed"])) for r in rows})
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return Correlation(math.nan, math.nan, math.nan, math.nan, len(pts), distinct,
                           "undefined: every solution has the same loss or accuracy")
    res = stats.spearmanr(x, y)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples (ties) give nan; reported as such
        boot = stats.bootstrap((x, y), lambda a, b: stats.spearmanr(a, b).statistic, paired=True,
                               vectorized=False, n_resamples=1000, method="percentile",
                               rng=np.random.default_rng(seed))
    note = ""
    if distinct < MIN_DISTINCT_FOR_SPEARMAN:
        note = f"only {distinct} distinct solutions: too few for the correlation to mean much"
    return Correlation(float(res.statistic), float(res.pvalue), float(boot.confidence_interval.low),
                       float(boot.confidence_interval.high), len(pts), distinct, note)


@dataclass
class VarianceShare:
    metric: str
    objective: float
    searcher: float
    residual: float
    n: int


def variance_shares(rows: Sequence[dict[str, Any]], metric: str, transform=lambda v: v) -> VarianceShare | None:
    """Two-way decomposition (objective × searcher, one observation per cell) of ``metric``.

    SS_total = SS_objective + SS_searcher + SS_residual (interaction), from the balanced
    table of searchers present under every objective. Shares are SS / SS_total.
    """
    table: dict[tuple[str, str], float] = {}
    for r in rows:
        value = r["metrics"].get(metric) if metric != "calibration_loss" else r["calibration_loss"]
        if value is not None and math.isfinite(value):
            table[(r["objective"], r["search"])] = transform(value)
    objectives = sorted({o for o, _ in table})
    searchers = sorted({s for _, s in table if all((o, s) in table for o in objectives)})
    if len(objectives) < 2 or len(searchers) < 2:
        return None
    y = np.array([[table[(o, s)] for s in searchers] for o in objectives])
    grand = y.mean()
    ss_total = ((y - grand) ** 2).sum()
    if ss_total == 0:
        return VarianceShare(metric, math.nan, math.nan, math.nan, y.size)
    ss_obj = len(searchers) * ((y.mean(1) - grand) ** 2).sum()
    ss_srch = len(objectives) * ((y.mean(0) - grand) ** 2).sum()
    return VarianceShare(metric, ss_obj / ss_total, ss_srch / ss_total, 1 - (ss_obj + ss_srch) / ss_total, y.size)


@dataclass
class Verdict:
    claim: str
    verdict: str  # "held" | "not held" | "not measured"
    evidence: list[str] = field(default_factory=list)


def _share(values: Sequence[bool]) -> str:
    return f"{sum(values)}/{len(values)}"


def verdict_structure(conds: dict[Condition, list[dict[str, Any]]]) -> tuple[Verdict, Verdict]:
    """Claim 1, in its two parts, each with its own verdict: (a) the objectives remove
    different layers (sets overlap less across objectives than within one); (b) ppl
    removals are contiguous and mid-to-late (more contiguous than margin's, mean depth >= 0.5)."""
    claim_a = "The objectives remove structurally different layers (claim 1a)."
    claim_b = "Perplexity removals concentrate in contiguous mid-to-late blocks (claim 1b)."
    groups: dict[tuple[str, str, int], dict[str, list[dict[str, Any]]]] = defaultdict(dict)
    for (grid, model, objective, budget), rows in conds.items():
        groups[(grid, model, budget)][objective] = rows
    ev_a, ev_b, differ, contiguous, late = [], [], [], [], []
    for (grid, model, budget), objs in sorted(groups.items()):
        if not {"ppl", "margin"} <= set(objs):
            continue
        ppl, margin = objs["ppl"], objs["margin"]
        within = np.nanmean([mean_pairwise_jaccard([r["removed"] for r in ppl]),
                             mean_pairwise_jaccard([r["removed"] for r in margin])])
        paired = [(a, b) for a in ppl for b in margin if a["search"] == b["search"]]
        across = float(np.mean([jaccard(a["removed"], b["removed"]) for a, b in paired])) if paired else math.nan
        c_ppl = float(np.mean([contiguity(r["removed"]) for r in ppl]))
        c_margin = float(np.mean([contiguity(r["removed"]) for r in margin]))
        n_layers = ppl[0]["n_layers"]
        d_ppl = float(np.mean([relative_depth(r["removed"], n_layers) for r in ppl]))
        differ.append(across < within)
        contiguous.append(c_ppl > c_margin)
        late.append(d_ppl >= 0.5)
        ev_a.append(f"{model} M={budget}: Jaccard within objective {within:.2f} vs across objectives {across:.2f}")
        ev_b.append(f"{model} M={budget}: contiguity ppl {c_ppl:.2f} vs margin {c_margin:.2f}; "
                    f"mean relative depth of ppl removals {d_ppl:.2f}")
    if not differ:
        missing = ["no condition has both objectives"]
        return Verdict(claim_a, "not measured", missing), Verdict(claim_b, "not measured", list(missing))
    held_a = sum(differ) > len(differ) / 2
    held_b = sum(contiguous) > len(contiguous) / 2 and sum(late) > len(late) / 2
    ev_a.insert(0, f"across < within objective in {_share(differ)} conditions")
    ev_b.insert(0, f"ppl more contiguous than margin in {_share(contiguous)} conditions; ppl removals "
                   f"mid-to-late (mean relative depth >= 0.5) in {_share(late)}")
    return (Verdict(claim_a, "held" if held_a else "not held", ev_a),
            Verdict(claim_b, "held" if held_b else "not held", ev_b))


def verdict_alignment(conds: dict[Condition, list[dict[str, Any]]]) -> Verdict:
    """Claim 2: weak/negative alignment under ppl (paper ρ −0.78 … ≈0), positive under margin."""
    claim = ("Calibration loss and downstream accuracy rankings are negatively or weakly aligned under "
             "perplexity pruning (paper: ρ from −0.78 to ≈0) and positively aligned under margin pruning.")
    evidence, ppl_ok, margin_ok = [], [], []
    for (grid, model, objective, budget), rows in conds.items():
        corr = alignment(rows)
        if corr is None or math.isnan(corr.rho):
            continue
        if objective == "ppl":
            ppl_ok.append(corr.rho <= 0.3)
        elif objective == "margin":
            margin_ok.append(corr.rho > 0)
        else:
            continue
        evidence.append(f"{model} {objective} M={budget}: ρ = {corr.rho:+.2f} (n={corr.n}, "
                        f"{corr.distinct} distinct){'; ' + corr.note if corr.note else ''}")
    if not ppl_ok or not margin_ok:
        return Verdict(claim, "not measured", evidence or ["no condition with a defined correlation"])
    held = sum(ppl_ok) > len(ppl_ok) / 2 and sum(margin_ok) > len(margin_ok) / 2
    evidence.insert(0, f"ppl conditions with ρ <= 0.3: {_share(ppl_ok)}; margin conditions with ρ > 0: "
                       f"{_share(margin_ok)} (thresholds: weak = ρ <= 0.3, positive = ρ > 0)")
    return Verdict(claim, "held" if held else "not held", evidence)


def verdict_search(conds: dict[Condition, list[dict[str, Any]]]) -> Verdict:
    """Claim 3: under a fixed objective searchers differ little, agree on sets, differ in cost."""
    claim = ("Under a fixed objective, search algorithms differ by little in accuracy (paper: 1–3 points) "
             "and converge to similar sets, at very different cost.")
    ranges, overlaps, cost_ratios, evidence = [], [], [], []
    for (grid, model, objective, budget), rows in conds.items():
        accs = [r["metrics"].get("avg_acc") for r in rows if r["metrics"].get("avg_acc") is not None]
        if len(rows) < 2 or len(accs) < 2:
            continue
        spread = 100 * (max(accs) - min(accs))
        overlap = mean_pairwise_jaccard([r["removed"] for r in rows])
        evals = [max(r["cost"]["evaluations"], 1) for r in rows]
        ratio = max(evals) / min(evals)
        ranges.append(spread)
        overlaps.append(overlap)
        cost_ratios.append(ratio)
        evidence.append(f"{model} {objective} M={budget}: accuracy spread {spread:.1f} points; mean pairwise "
                        f"Jaccard {overlap:.2f}; evaluations max/min {ratio:.0f}×")
    if not ranges:
        return Verdict(claim, "not measured", ["no condition with two or more searchers"])
    med_range, med_overlap, med_ratio = float(np.median(ranges)), float(np.median(overlaps)), float(
        np.median(cost_ratios))
    held = med_range <= 3.0 and med_overlap >= 0.5 and med_ratio >= 5
    evidence.insert(0, f"median accuracy spread {med_range:.1f} points (threshold <= 3), median pairwise "
                       f"Jaccard {med_overlap:.2f} (>= 0.5), median cost ratio {med_ratio:.0f}× (>= 5)")
    return Verdict(claim, "held" if held else "not held", evidence)

"""Beyond the paper: do its findings survive a heal? Judged on healed results only (``reads_healed``).

Every healed result carries its set's evaluation before the heal and after it, both in float32 on the same
items (:mod:`depthprune.healing.grid_heals`), so before and after are paired item by item: one bootstrap of the
evaluation's item clusters draws both. The second healing seed's spread (sets healed twice) enters each MDE.
The statistics were fixed in DESIGN.md ("Healing") before any healed result was read; the thresholds are in
claims.toml.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from depthprune.healing.config import MAIN_METHOD, HealConfig
from depthprune.report import noise
from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.report.claims.search import CONTRIBUTION_2
from depthprune.results.schema import Result, to_json

PARAMS = ("n_resamples", "seed", "confidence", "power")
#: the paper's words each healing claim asks about again, after a heal (verbatim, as its unhealed claim quotes them)
OBJECTIVE_QUOTE = ("performance variance across search algorithms is smaller in language modeling perplexity but "
                   "comparable in downstream reasoning accuracy relative to the variation induced by the "
                   "configuration (Section 5.2)")
RANK_QUOTE = ("calibration perplexity and downstream reasoning rankings show negative or weak correlations under "
              "perplexity pruning but positive correlations under task likelihood margin pruning (Section 5.3)")


def before(r: Result) -> Result:
    """The healed result's set as it was before its heal (float32, the same evaluation), as a result."""
    b = r["healing"]["before_float32"]
    return Result.of({**to_json(r), "metrics": b["metrics"], "item_outcomes": b["item_outcomes"],
                      "item_clusters": b.get("item_clusters", {}), "window_nll": b["window_nll"]})


def main_method(r: Result) -> bool:
    """Whether ``r`` is healed by the grid's main method (healing.config.MAIN_METHOD): another method's heals
    (``lora-hidden``, on a subset) are measured beside it and read by no claim."""
    return r.identity.heal is not None and HealConfig.parse_tag(r.identity.heal)[0] == MAIN_METHOD


def _rows(rows: Sequence[Result], g: Mapping[str, Any]) -> list[Result]:
    """One healed result per cell of the paper's searchers, on the grid's main heal seed (the lowest)."""
    rows = [r for r in rows if main_method(r) and r.identity.search in g["searchers"]
            and r.get("healing", {}).get("before_float32") and r["evaluated"]]
    if not rows:
        return []
    main = min(HealConfig.parse_tag(r.identity.heal)[2] for r in rows if r.identity.heal)
    return [r for r in rows if r.identity.heal and HealConfig.parse_tag(r.identity.heal)[2] == main]


def _select(rows: Sequence[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> list[Result]:
    """Every healed result of the grid by its main method (both seeds: the judges take the main seed's, the MDE
    both)."""
    return [r for r in rows if main_method(r)]


def seed_spread(rows: Sequence[Result]) -> float:
    """The SD, over sets healed on two seeds, of their healed avg_acc difference / sqrt 2 (0 with no pair)."""
    by: dict[tuple[str, tuple[int, ...]], dict[str, float]] = defaultdict(dict)
    for r in rows:
        heal = r.identity.heal
        if heal is not None and main_method(r) and helpers.metric(r, "avg_acc") is not None:
            by[(r.identity.model, tuple(r["removed"]))][heal] = helpers.known(r, "avg_acc")
    diffs = [a - b for v in by.values() if len(v) >= 2 for a, b in [list(v.values())[:2]]]
    return float(np.sqrt(np.mean(np.square(diffs)) / 2)) if diffs else 0.0


def _mde(boot: np.ndarray, t: Mapping[str, Any], spread: float) -> float:
    """The bootstrap's MDE with the seed spread added in quadrature."""
    return math.hypot(helpers.mde(boot, t), noise.z_sum(t["confidence"], t["power"]) * spread)


def _objective_gaps(rows: list[Result], g: Mapping[str, Any], t: Mapping[str, Any]):
    """Per (model, budget) with a searcher healed under both objectives: the solutions (margin then ppl, before
    then after) and their bootstrap means."""
    conds: list[tuple[tuple[str, int], list[str]]] = []
    groups: list[list[Result]] = []
    for (model, budget), (ppl, margin) in helpers.pairs(rows, g).items():
        both = sorted(set(ppl) & set(margin))
        if not both:
            continue
        sols = [before(margin[s]) for s in both] + [before(ppl[s]) for s in both] + \
               [margin[s] for s in both] + [ppl[s] for s in both]
        if helpers.blocks(sols, "avg_acc") is None:
            continue
        conds.append(((model, budget), both))
        groups.append(sols)
    if not groups:
        return conds, groups, []
    _, boot = helpers.measured_groups(groups, "avg_acc", t["n_resamples"], t["seed"])
    return conds, groups, boot


def _prepared(rows: list[Result], g: Mapping[str, Any], t: Mapping[str, Any], threshold: str):
    """What both gap claims start from: the seed spread (over every healed row), the main seed's rows, the
    thresholds a verdict states, and the conditions' paired solutions with their bootstrap."""
    th = {k: t[k] for k in (threshold, "confidence", "power")}
    main = _rows(rows, g)
    return seed_spread(rows), main, th, _objective_gaps(main, g, t)


def _gap(means: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(before gap, after gap) per draw: mean over searchers of margin-chosen minus ppl-chosen accuracy."""
    b = (means[..., :n] - means[..., n:2 * n]).mean(-1)
    a = (means[..., 2 * n:3 * n] - means[..., 3 * n:]).mean(-1)
    return b, a


@register(Claim(
    "heal-objective", "After healing", "beyond the paper: Introduction, observation (ii), after a heal",
    OBJECTIVE_QUOTE,
    "per (model, budget): the objective's accuracy gap (mean over searchers of avg_acc of the margin-chosen minus "
    "the ppl-chosen set) before and after healing, paired; the median over conditions of the healed gap in the "
    "unhealed gap's direction, and of its ratio to the unhealed gap. SURVIVES: the healed gap's interval above 0 "
    "and the ratio's at least min_ratio; SHRINKS: the ratio's interval below min_ratio; FLIPS: the healed gap's "
    "interval below 0", "min_ratio", ("min_ratio", *PARAMS), gist="the objective's accuracy gap survives a heal",
    rules=(Rule("ratio", "min_ratio", "CI low ≥ {}, healed gap CI low > 0"),), reads_healed=True, select=_select))
def judge_heal_objective(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    spread, rows, th, (conds, groups, boot) = _prepared(rows, g, t, "min_ratio")
    if not conds:
        return verdict("heal-objective", grid, None, {"healed_gap": None, "ratio": None}, th, 0, 0,
                       "no (model, budget) healed under both objectives with per-item outcomes")
    point_b, point_a, draws_a, draws_r, details = [], [], [], [], []
    for ((model, budget), both), sols, (means, _) in zip(conds, groups, boot):
        n = len(both)
        pm = np.array([helpers.known(r, "avg_acc") for r in sols])
        b, a = _gap(pm, n)
        sign = 1.0 if b >= 0 else -1.0
        db, da = _gap(means, n)
        point_b.append(float(b))
        point_a.append(float(a) * sign)
        draws_a.append(da * sign)
        with np.errstate(divide="ignore", invalid="ignore"):
            draws_r.append(np.where(db != 0, da / db, np.nan))
        details.append({"model": model, "budget": budget, "searchers": both, "gap_before": float(b),
                        "gap_after": float(a), "ratio": float(a) / float(b) if b else None})
    healed = helpers.median(point_a)
    ratio = helpers.median(d["ratio"] for d in details if d["ratio"] is not None) if any(
        d["ratio"] is not None for d in details) else math.nan
    a_low, a_high = helpers.interval(np.median(np.array(draws_a), axis=0), t["confidence"])
    r_boot = np.median(np.array(draws_r), axis=0)
    r_low, r_high = helpers.interval(r_boot, t["confidence"])
    stat = {"healed_gap": healed, "healed_gap_low": a_low, "healed_gap_high": a_high,
            "healed_gap_mde": _mde(np.median(np.array(draws_a), axis=0), t, spread),
            "ratio": ratio, "ratio_low": r_low, "ratio_high": r_high, "seed_sd": spread}
    if a_high < 0:
        held, why = False, f"FLIPS: the healed gap's interval [{a_low:.3f}, {a_high:.3f}] lies below 0"
    elif a_low > 0 and r_low >= t["min_ratio"]:
        held, why = True, (f"SURVIVES: healed gap {healed:.3f} [{a_low:.3f}, {a_high:.3f}], ratio {ratio:.2f} "
                           f"[{r_low:.2f}, {r_high:.2f}] ≥ {t['min_ratio']}")
    elif r_high < t["min_ratio"]:
        held, why = False, f"SHRINKS: ratio {ratio:.2f} [{r_low:.2f}, {r_high:.2f}] < {t['min_ratio']}"
    else:
        held, why = None, (f"healed gap {healed:.3f} [{a_low:.3f}, {a_high:.3f}], ratio {ratio:.2f} [{r_low:.2f}, "
                           f"{r_high:.2f}]: the evaluation's noise cannot decide")
    return verdict("heal-objective", grid, held, stat, th, len(conds), helpers.distinct(rows), why, details)


@register(Claim(
    "heal-search", "After healing", "beyond the paper: Introduction, second contribution, after a heal",
    CONTRIBUTION_2,
    "per (model, budget, objective) with one-shot healed: the largest healed-accuracy gain of a searcher over "
    "one-shot ÷ |the healed objective gap| of its (model, budget); the median's interval ≤ max_ratio",
    "max_ratio", ("max_ratio", *PARAMS), gist="search still buys little after a heal",
    rules=(Rule("ratio", "max_ratio", "CI high ≤ {}"),), reads_healed=True, select=_select))
def judge_heal_search(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    spread, rows, th, (conds, groups, boot) = _prepared(rows, g, t, "max_ratio")
    ratios, draws, details = [], [], []
    for ((model, budget), both), sols, (means, _) in zip(conds, groups, boot):
        n = len(both)
        if g["oneshot"] not in both or n < 2:
            continue
        pm = np.array([helpers.known(r, "avg_acc") for r in sols])
        _, gap_a = _gap(pm, n)
        _, gap_draws = _gap(means, n)
        one = both.index(g["oneshot"])
        for k, name in ((2 * n, "margin"), (3 * n, "ppl")):
            gains = pm[k:k + n] - pm[k + one]
            gain_draws = (means[:, k:k + n] - means[:, k + one:k + one + 1]).max(1)
            with np.errstate(divide="ignore", invalid="ignore"):
                draws.append(np.where(gap_draws != 0, gain_draws / np.abs(gap_draws), np.inf))
            ratio = float(gains.max() / abs(gap_a)) if gap_a else math.inf
            ratios.append(ratio)
            details.append({"model": model, "budget": budget, "objective": name, "largest_gain": float(gains.max()),
                            "healed_gap": float(gap_a), "ratio": ratio})
    if not ratios:
        return verdict("heal-search", grid, None, {"ratio": None}, th, 0, 0,
                       f"no condition healed with {g['oneshot']} and another searcher under both objectives")
    ratio = helpers.median(ratios)
    boot_r = np.median(np.array(draws), axis=0)
    low, high = helpers.interval(boot_r, t["confidence"])
    held = helpers.decide(low, high, t["max_ratio"], "<=")
    stat = {"ratio": ratio, "ratio_low": low, "ratio_high": high,
            "ratio_mde": _mde(boot_r, t, spread)}
    why = (f"median healed gain / healed objective gap {ratio:.2f} [{low:.2f}, {high:.2f}] vs ≤ {t['max_ratio']}"
           + ("" if held is not None else ": the evaluation's noise cannot decide"))
    return verdict("heal-search", grid, held, stat, th, len(details), helpers.distinct(rows), why, details)


@register(Claim(
    "heal-rank", "After healing", "beyond the paper: Introduction, observation (iii), after a heal",
    RANK_QUOTE,
    "per (model, objective), over its distinct healed sets (≥ min_distinct): Spearman ρ between a set's "
    "calibration loss (negated) and its healed avg_acc, and between its avg_acc before and after healing; the "
    "median over (model, objective) of the first, its interval over the evaluation's item bootstrap ≥ min_rho: "
    "what the search optimises still predicts the healed model", "min_rho", ("min_rho", "min_distinct", *PARAMS),
    gist="the calibration loss still predicts the healed accuracy",
    rules=(Rule("rho_loss_healed", "min_rho", "CI low ≥ {}"),), reads_healed=True, select=_select))
def judge_heal_rank(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    rows = _rows(rows, g)
    th = {k: t[k] for k in ("min_rho", "min_distinct", "confidence", "power")}
    by: dict[tuple[str, str], dict[tuple[int, ...], Result]] = defaultdict(dict)
    for r in rows:
        by[(r.identity.model, r.identity.objective)].setdefault(tuple(r["removed"]), r)
    rho_loss, rho_ba, d_loss, d_ba, details = [], [], [], [], []
    for (model, objective), sets in sorted(by.items()):
        sols = list(sets.values())
        if len(sols) < t["min_distinct"]:
            continue
        both = [before(r) for r in sols] + sols
        if helpers.blocks(both, "avg_acc") is None:
            continue
        _, boot = helpers.measured_groups([both], "avg_acc", t["n_resamples"], t["seed"])
        means = boot[0][0]
        n = len(sols)
        loss = [-float(r["calibration_loss"]) for r in sols]
        acc_b = [helpers.known(r, "avg_acc") for r in both[:n]]
        acc_a = [helpers.known(r, "avg_acc") for r in sols]
        rho_loss.append(helpers.spearman(loss, acc_a))
        rho_ba.append(helpers.spearman(acc_b, acc_a))
        d_loss.append(np.array([helpers.spearman(loss, m[n:]) for m in means]))
        d_ba.append(np.array([helpers.spearman(m[:n], m[n:]) for m in means]))
        details.append({"model": model, "objective": objective, "sets": n, "rho_loss_healed": rho_loss[-1],
                        "rho_before_after": rho_ba[-1]})
    if not details:
        return verdict("heal-rank", grid, None, {"rho_loss_healed": None}, th, 0, 0,
                       f"no (model, objective) with ≥ {t['min_distinct']} distinct healed sets and per-item outcomes")
    boot_l = np.nanmedian(np.array(d_loss), axis=0)
    boot_ba = np.nanmedian(np.array(d_ba), axis=0)
    low, high = helpers.interval(boot_l, t["confidence"])
    ba_low, ba_high = helpers.interval(boot_ba, t["confidence"])
    rho = helpers.median(rho_loss)
    held = helpers.decide(low, high, t["min_rho"], ">=")
    stat = {"rho_loss_healed": rho, "rho_loss_healed_low": low, "rho_loss_healed_high": high,
            "rho_loss_healed_mde": _mde(boot_l, t, 0.0), "rho_before_after": helpers.median(rho_ba),
            "rho_before_after_low": ba_low, "rho_before_after_high": ba_high}
    why = (f"median ρ(−calibration loss, healed accuracy) {rho:.2f} [{low:.2f}, {high:.2f}] vs ≥ {t['min_rho']}; "
           f"ρ(before, after) {stat['rho_before_after']:.2f} [{ba_low:.2f}, {ba_high:.2f}]"
           + ("" if held is not None else ": the evaluation's noise cannot decide"))
    return verdict("heal-rank", grid, held, stat, th, len(details), helpers.distinct(rows), why, details)

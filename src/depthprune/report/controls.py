"""REPORT.md's control sections: each control grid's cells against the main grid they vary.

A controls grid (``kind = "controls"`` in its case file) varies one thing per block against
the main grid named by ``compare_with``. Each section here joins the two on (model,
objective, searcher, budget), tabulates, and ends in a plain finding computed from the
table — or "not measured" where the cells it needs are absent. Pure functions of results.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

from depthprune.report import analysis as A
from depthprune.report.cells import fmt as _f, layers as _layers, pct as _pct

Key = tuple[str, str, str, int]  # model, objective, searcher, budget


def is_control(r: dict[str, Any]) -> bool:
    return r.get("grid_kind") == "controls"


def _extra_seed(r: dict[str, Any]) -> bool:
    """A cell of a calibration-seed block (its id ends in -c<seed>)."""
    return re.search(r"-c\d+$", r.get("cell") or "") is not None


def _index(rows: Sequence[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    """Default-variant, default-calibration-seed cells by (model, objective, searcher, budget)."""
    return {(r["model"], r["objective"], r["search"], r["budget"]): r for r in rows
            if r.get("variant", "default") == "default" and not _extra_seed(r)}


def _acc(r: dict[str, Any] | None) -> float | None:
    return None if r is None else r.get("metrics", {}).get("avg_acc")


def _table(rows: list[list[Any]], headers: list[str]) -> str:
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def ground_truth(ctrl: list[dict[str, Any]], main: list[dict[str, Any]]) -> list[str]:
    """Each main-grid searcher's loss against the optimum (exhaustive) and chance (random sets)."""
    c, m = _index(ctrl), _index(main)
    rows, gaps = [], defaultdict(list)
    optimal = defaultdict(int)
    conditions = sorted({(k[0], k[1], k[3]) for k in c if k[2] in ("exhaustive", "random")})
    for model, objective, budget in conditions:
        ex, rnd = c.get((model, objective, "exhaustive", budget)), c.get((model, objective, "random", budget))
        sample = [loss for s, loss in (rnd or {}).get("trace", []) if len(s) == budget and math.isfinite(loss)]
        chance = statistics.median(sample) if sample else None
        searchers = {k[2]: r for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget)}
        if not searchers:
            continue
        opt = ex["calibration_loss"] if ex else None
        ref = opt if opt is not None else min(r["calibration_loss"] for r in searchers.values())
        for name, r in sorted(searchers.items(), key=lambda kv: A.searcher_rank(kv[0])):
            gap = None
            if chance is not None and chance > ref:
                gap = (r["calibration_loss"] - ref) / (chance - ref)
                gaps[name].append(gap)
            if opt is not None and r["calibration_loss"] <= opt * (1 + 1e-9) + 1e-12:
                optimal[name] += 1
            rows.append([model, objective, budget, name, _f(r["calibration_loss"], 4), _f(opt, 4),
                         _f(chance, 4), _f(rnd["calibration_loss"] if rnd else None, 4), _f(gap, 3)])
    if not rows:
        return ["Not measured: needs the controls grid's exhaustive/random cells and the main grid's cells."]
    n_opt = len({(k[0], k[1], k[3]) for k in c if k[2] == "exhaustive"})
    summary = "; ".join(f"{n} {_f(statistics.median(g), 3)}" + (f" (optimal in {optimal[n]}/{n_opt})" if n_opt else "")
                        for n, g in sorted(gaps.items(), key=lambda kv: A.searcher_rank(kv[0])))
    return ["Calibration loss of each searcher's solution (main grid) against the optimum (exhaustive, M=3 only) "
            "and chance (median loss of 32 uniformly random sets; 'random best' = the best of them). "
            "gap = (loss − optimum) / (chance − optimum): 0 = optimal, 1 = no better than a random set; at M "
            "without exhaustive, the best loss any searcher found stands for the optimum.", "",
            _table(rows, ["model", "objective", "M", "searcher", "loss", "optimum", "chance", "random best", "gap"]),
            "", f"**Finding.** Median gap per searcher: {summary}."]


def structural(ctrl: list[dict[str, Any]], main: list[dict[str, Any]]) -> list[str]:
    """Block Influence (no loss search) against oneshot and the best searcher of the condition."""
    c, m = _index(ctrl), _index(main)
    rows, worse, acc_deltas = [], 0, []
    for (model, objective, name, budget), bi in sorted(c.items()):
        if name != "bi":
            continue
        one = m.get((model, objective, "oneshot", budget))
        cond = [r for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget)]
        if one is None or not cond:
            continue
        best = min(cond, key=lambda r: r["calibration_loss"])
        worse += bi["calibration_loss"] > one["calibration_loss"]
        if _acc(bi) is not None and _acc(one) is not None:
            acc_deltas.append(100 * (_acc(bi) - _acc(one)))
        rows.append([model, objective, budget, _layers(bi["removed"]), _layers(one["removed"]),
                     _f(A.jaccard(bi["removed"], one["removed"]), 2), _f(bi["calibration_loss"], 4),
                     _f(one["calibration_loss"], 4), _f(best["calibration_loss"], 4), _pct(_acc(bi)),
                     _pct(_acc(one)), _pct(_acc(best))])
    if not rows:
        return ["Not measured: needs the controls grid's bi cells and the main grid's oneshot cells."]
    return ["Block Influence (ShortGPT: remove the M blocks whose output is most similar to their input on the "
            "dense model, over each objective's calibration data; no loss guides it) against oneshot (the same "
            "kind of one-pass ranking, by the loss itself) and the condition's best-loss searcher.", "",
            _table(rows, ["model", "objective", "M", "BI removes", "oneshot removes", "Jaccard", "BI loss",
                          "oneshot loss", "best loss", "BI acc", "oneshot acc", "best acc"]),
            "", f"**Finding.** Block Influence's set has a worse calibration loss than oneshot's in {worse} of "
                f"{len(rows)} conditions; its average accuracy minus oneshot's: median "
                f"{_f(statistics.median(acc_deltas), 1) if acc_deltas else '–'} points (range "
                f"{_f(min(acc_deltas), 1) if acc_deltas else '–'} to {_f(max(acc_deltas), 1) if acc_deltas else '–'})."]


def prior_ablation(ctrl: list[dict[str, Any]], main: list[dict[str, Any]]) -> list[str]:
    m = _index(main)
    rows, worse, better, same = [], 0, 0, 0
    deltas = []
    for r in sorted(ctrl, key=lambda r: r["cell"]):
        if r.get("variant") != "uniform":
            continue
        base = m.get((r["model"], r["objective"], r["search"], r["budget"]))
        if base is None:
            continue
        d = r["calibration_loss"] - base["calibration_loss"]
        scale = max(abs(base["calibration_loss"]), 1e-12)
        if sorted(r["removed"]) == sorted(base["removed"]):
            same += 1
        elif d > 1e-6 * scale:
            worse += 1
        elif d < -1e-6 * scale:
            better += 1
        deltas.append(d)
        rows.append([r["model"], r["objective"], r["budget"], r["search"], _layers(base["removed"]),
                     _layers(r["removed"]), _f(base["calibration_loss"], 4), _f(r["calibration_loss"], 4),
                     _f(d, 4), _pct(_acc(base)), _pct(_acc(r)), r["cost"]["evaluations"]])
    if not rows:
        return ["Not measured: needs the controls grid's uniform-prior cells and the main grid's ga/bo cells."]
    return ["GA and BO with the shared single-removal prior (main grid) and with a uniform one (control), the same "
            "evaluation limit (the uniform runs do not pay for the prior, so they score more M-sets).", "",
            _table(rows, ["model", "objective", "M", "searcher", "prior: removes", "uniform: removes", "prior loss",
                          "uniform loss", "Δ loss", "prior acc", "uniform acc", "uniform evals"]),
            "", f"**Finding.** Without the prior, the searcher found the same set in {same} of {len(rows)} runs, a "
                f"worse one in {worse} and a better one in {better}; median Δ loss {_f(statistics.median(deltas), 4)} "
                f"({'the prior helps' if worse > better else 'the prior does not help' if better > worse else 'no net effect of the prior'} "
                "at these evaluation limits)."]


def data_vs_loss(ctrl: list[dict[str, Any]], main: list[dict[str, Any]]) -> list[str]:
    """ppl@C4 (A), ppl@Commonsense (B, control), margin@Commonsense (C): which change moves the sets?"""
    m = _index(main)
    rows, j_data, j_loss = [], [], []
    for r in sorted(ctrl, key=lambda r: r["cell"]):
        if r.get("variant") != "csdata":
            continue
        a = m.get((r["model"], "ppl", r["search"], r["budget"]))
        cm = m.get((r["model"], "margin", r["search"], r["budget"]))
        if a is None or cm is None:
            continue
        ja, jl = A.jaccard(a["removed"], r["removed"]), A.jaccard(r["removed"], cm["removed"])
        j_data.append(ja)
        j_loss.append(jl)
        rows.append([r["model"], r["budget"], r["search"], _layers(a["removed"]), _layers(r["removed"]),
                     _layers(cm["removed"]), _f(ja, 2), _f(jl, 2), _pct(_acc(a)), _pct(_acc(r)), _pct(_acc(cm))])
    if not rows:
        return ["Not measured: needs the controls grid's csdata cells and the main grid's ppl and margin cells."]
    ma, ml = statistics.mean(j_data), statistics.mean(j_loss)
    verdict = ("the **data** moves the removed sets more than the loss does" if ma < ml else
               "the **loss** moves the removed sets more than the data does" if ml < ma else
               "data and loss move the removed sets equally")
    return ["A = ppl on C4 (main grid), B = ppl on the margin's Commonsense-170k records (control: records joined "
            "into windows), C = margin on Commonsense-170k (main grid). A→B changes only the data, B→C only the "
            "loss. Jaccard overlap of the removed sets (1 = the same set).", "",
            _table(rows, ["model", "M", "searcher", "A: ppl@C4", "B: ppl@CS", "C: margin@CS", "J(A,B) data",
                          "J(B,C) loss", "acc A", "acc B", "acc C"]),
            "", f"**Finding.** Mean Jaccard when only the data changes {ma:.2f}, when only the loss changes "
                f"{ml:.2f} ({len(rows)} searcher × model × budget cases): {verdict}."]


def seeds(ctrl: list[dict[str, Any]], main: list[dict[str, Any]]) -> list[str]:
    """Removed-set stability and metric spread across calibration seeds (0 from the main grid)."""
    m = _index(main)
    by: dict[Key, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in ctrl:
        cseed = r.get("calibration_seed")
        if r.get("variant", "default") != "default" or not _extra_seed(r):
            continue
        by[(r["model"], r["objective"], r["search"], r["budget"])][cseed] = r
    rows, per_searcher, spreads = [], defaultdict(list), []
    for key, runs in sorted(by.items()):
        base = m.get(key)
        if base is None:
            continue
        runs = {base.get("calibration_seed", 0): base, **runs}
        sets = [runs[s]["removed"] for s in sorted(runs)]
        accs = [_acc(runs[s]) for s in sorted(runs) if _acc(runs[s]) is not None]
        ppls = [runs[s]["metrics"].get("c4_ppl") for s in sorted(runs) if runs[s]["metrics"].get("c4_ppl")]
        jac = A.mean_pairwise_jaccard(sets)
        per_searcher[key[2]].append(jac)
        spread = 100 * (max(accs) - min(accs)) if len(accs) > 1 else None
        if spread is not None:
            spreads.append(spread)
        rows.append([key[0], key[1], key[3], key[2], " | ".join(_layers(s) for s in sets), _f(jac, 2), _f(spread, 1),
                     _f(max(ppls) / min(ppls) - 1, 3) if len(ppls) > 1 else "–"])
    if not rows:
        return ["Not measured: needs the controls grid's calibration-seed cells and the main grid's cells."]
    across = []
    for model, objective, _search, budget in by:
        accs = [_acc(r) for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget) and _acc(r) is not None]
        if len(accs) > 1:
            across.append(100 * (max(accs) - min(accs)))
    summary = "; ".join(f"{n} {statistics.mean(v):.2f}" for n, v in sorted(per_searcher.items(), key=lambda kv: A.searcher_rank(kv[0])))
    return ["Calibration seeds 0 (main grid), 1 and 2 (controls): the same searcher on three calibration samples of "
            "the same size. Stochastic searchers (ga) change their own seed with the calibration seed. Spread = max − "
            "min over the seeds (avg accuracy in points; C4 perplexity relative).", "",
            _table(rows, ["model", "objective", "M", "searcher", "removed (seed 0 | 1 | 2)", "mean Jaccard",
                          "acc spread", "c4 ppl spread"]),
            "", f"**Finding.** Mean pairwise Jaccard of removed sets across calibration seeds, per searcher: {summary}. "
                f"The accuracy spread across seeds (median {statistics.median(spreads):.1f} points) compares with the "
                f"spread across the seven searchers on seed 0 in the same conditions (median "
                f"{statistics.median(across):.1f} points)" + (": a verdict about searchers that rests on accuracy "
                "differences smaller than the seed spread does not survive a new calibration sample."
                if across and statistics.median(spreads) >= statistics.median(across) else ".")]


SECTIONS = (("Ground truth and chance", ground_truth), ("A structural baseline: Block Influence", structural),
            ("Prior ablation", prior_ablation), ("Data vs loss", data_vs_loss),
            ("Calibration seeds", seeds))


def render_controls(results: list[dict[str, Any]]) -> list[str]:
    """Every control grid's sections against its main grid; [] if there is no control grid."""
    lines: list[str] = []
    for grid in sorted({r["grid"] for r in results if is_control(r)}):
        ctrl = [r for r in results if r["grid"] == grid]
        main_name = ctrl[0].get("compare_with")
        main = [r for r in results if r["grid"] == main_name and not is_control(r)]
        lines += [f"Controls grid `{grid}` ({len(ctrl)} cells) against the `{main_name}` grid ({len(main)} cells). "
                  "What the paper's text says it could not control (its last section), run here on the tiny "
                  "family; the alignment panel (≥ 12 evaluated sets per condition) is not run yet.", ""]
        for title, section in SECTIONS:
            lines += [f"### {title}", "", *section(ctrl, main), ""]
    return lines

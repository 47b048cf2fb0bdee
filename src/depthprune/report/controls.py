"""REPORT.md's control sections: each control grid's cells against the main grid they vary.

A controls grid (``kind = "controls"`` in its case file) varies one thing per block against
the main grid named by ``compare_with``. Each section here joins the two on (model,
objective, searcher, budget), tabulates, and ends in a plain finding computed from the
table — or "not measured" where the cells it needs are absent. Pure functions of results.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from depthprune.report import analysis, tables
from depthprune.report.cells import fmt as _f
from depthprune.report.cells import layers as _layers
from depthprune.report.cells import table as _fit
from depthprune.results.schema import Result

Key = tuple[str, str, str, int]  # model, objective, searcher, budget


def _key(r: Result) -> Key:
    i = r.identity
    return (i.model, i.objective, i.search, i.budget)


def is_control(r: Result) -> bool:
    return r.get("grid_kind") == "controls"


def _extra_seed(r: Result) -> bool:
    """A cell of a calibration-seed block (its id ends in -c<seed>)."""
    return re.search(r"-c\d+$", r.get("cell") or "") is not None


def _index(rows: Sequence[Result]) -> dict[Key, Result]:
    """Default-variant, default-calibration-seed cells by (model, objective, searcher, budget)."""
    return {_key(r): r for r in rows
            if r.identity.variant == "default" and not _extra_seed(r)}


def _acc(r: Result | None) -> float | None:
    return None if r is None else r.get("metrics", {}).get("avg_acc")


def _table(rows: list[list[Any]], headers: list[str], keys: int = 1) -> str:
    """A table at most 160 wide: split by columns (the first ``keys`` repeated) where wider."""
    return _fit(rows, headers, keys)


def _headline(r: Result) -> tuple[list[str], Any]:
    """The tasks a result's avg_acc averages and each task's headline metric (its profile's)."""
    prof = tables.profile_of([r])
    return tables.evaluated_tasks([r], prof), prof.headline_metric


def _acc_ci(r: Result | None) -> str:
    """A result's avg accuracy in points with its 95% interval, as every accuracy REPORT shows
    (:func:`depthprune.report.tables.accuracy_cell`: cluster bootstrap of its items; [–] without them)."""
    if r is None or _acc(r) is None:
        return "–"
    tasks, headline = _headline(r)
    return tables.accuracy_cell(r, tasks, headline, _acc(r))


def _paired(a: Result, b: Result) -> analysis.PairedDifference | None:
    """avg-acc(a) − avg-acc(b) over the same items with its paired 95% interval; None without outcomes."""
    if not a.get("item_outcomes") or not b.get("item_outcomes"):
        return None
    tasks, headline = _headline(a)
    tasks = [t for t in tasks if t in a["item_outcomes"] and t in b["item_outcomes"]]
    return analysis.paired_difference(a["item_outcomes"], b["item_outcomes"], tasks, headline) if tasks else None


def _delta(d: analysis.PairedDifference | None) -> str:
    return "–" if d is None else f"{100 * d.delta:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"


def ground_truth(ctrl: list[Result], main: list[Result]) -> list[str]:
    """Each main-grid searcher's loss against the optimum (exhaustive) and chance (random sets)."""
    c, m = _index(ctrl), _index(main)
    rows, gaps = [], defaultdict(list)
    optimal: defaultdict[str, int] = defaultdict(int)
    conditions = sorted({(k[0], k[1], k[3]) for k in c if k[2] in ("exhaustive", "random")})
    for model, objective, budget in conditions:
        ex, rnd = c.get((model, objective, "exhaustive", budget)), c.get((model, objective, "random", budget))
        trace = rnd.get("trace", []) if rnd is not None else []
        sample = [loss for s, loss in trace if len(s) == budget and math.isfinite(loss)]
        chance = statistics.median(sample) if sample else None
        searchers = {k[2]: r for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget)}
        if not searchers:
            continue
        opt = ex["calibration_loss"] if ex else None
        ref = opt if opt is not None else min(r["calibration_loss"] for r in searchers.values())
        for name, r in sorted(searchers.items(), key=lambda kv: analysis.searcher_rank(kv[0])):
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
                        for n, g in sorted(gaps.items(), key=lambda kv: analysis.searcher_rank(kv[0])))
    return ["Calibration loss of each searcher's solution (main grid) against the optimum (exhaustive, M=3 only) "
            "and chance (median loss of 32 uniformly random sets; 'random best' = the best of them). "
            "gap = (loss − optimum) / (chance − optimum): 0 = optimal, 1 = no better than a random set; at M "
            "without exhaustive, the best loss any searcher found stands for the optimum.", "",
            _table(rows, ["model", "objective", "M", "searcher", "loss", "optimum", "chance", "random best", "gap"]),
            "", f"**Finding.** Median gap per searcher: {summary}."]


def structural(ctrl: list[Result], main: list[Result]) -> list[str]:
    """Block Influence (no loss search) against oneshot and the best searcher of the condition."""
    c, m = _index(ctrl), _index(main)
    rows, accs, worse, acc_deltas, beyond, judged = [], [], 0, [], 0, 0
    for (model, objective, name, budget), bi in sorted(c.items()):
        if name != "bi":
            continue
        one = m.get((model, objective, "oneshot", budget))
        cond = [r for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget)]
        if one is None or not cond:
            continue
        best = min(cond, key=lambda r: r["calibration_loss"])
        worse += bi["calibration_loss"] > one["calibration_loss"]
        acc_bi, acc_one = _acc(bi), _acc(one)
        if acc_bi is not None and acc_one is not None:
            acc_deltas.append(100 * (acc_bi - acc_one))
        d = _paired(bi, one) if sorted(bi["removed"]) != sorted(one["removed"]) else None
        if d is not None:
            judged += 1
            beyond += d.distinguishable
        rows.append([model, objective, budget, _layers(bi["removed"]), _layers(one["removed"]),
                     _f(analysis.jaccard(bi["removed"], one["removed"]), 2), _f(bi["calibration_loss"], 4),
                     _f(one["calibration_loss"], 4), _f(best["calibration_loss"], 4), best.identity.search])
        accs.append([model, objective, budget, _acc_ci(bi), _acc_ci(one), _acc_ci(best),
                     "same set" if sorted(bi["removed"]) == sorted(one["removed"]) else _delta(d),
                     "–" if d is None else "yes" if d.distinguishable else "no"])
    if not rows:
        return ["Not measured: needs the controls grid's bi cells and the main grid's oneshot cells."]
    noise = (f"; where the sets differ ({judged} conditions), {beyond} accuracy differences lie beyond the evaluation's "
             "noise (paired 95% interval excluding 0)" if judged else "")
    return ["Block Influence (ShortGPT: remove the M blocks whose output is most similar to their input on the "
            "dense model, over each objective's calibration data; no loss guides it) against oneshot (the same "
            "kind of one-pass ranking, by the loss itself) and the condition's best-loss searcher (its name in "
            "*best*). The sets and their calibration losses, then their average accuracies in % with 95% "
            "intervals (cluster bootstrap of each solution's items) and BI's minus oneshot's over the same items "
            "(paired bootstrap).", "",
            _table(rows, ["model", "objective", "M", "BI removes", "oneshot removes", "Jaccard", "BI loss",
                          "oneshot loss", "best loss", "best"], keys=3),
            "", _table(accs, ["model", "objective", "M", "BI acc", "oneshot acc", "best acc", "BI − oneshot",
                              "beyond noise"], keys=3),
            "", f"**Finding.** Block Influence's set has a worse calibration loss than oneshot's in {worse} of "
                f"{len(rows)} conditions; its average accuracy minus oneshot's: median "
                f"{_f(statistics.median(acc_deltas), 1) if acc_deltas else '–'} points (range "
                f"{_f(min(acc_deltas), 1) if acc_deltas else '–'} to {_f(max(acc_deltas), 1) if acc_deltas else '–'})"
                f"{noise}."]


def prior_ablation(ctrl: list[Result], main: list[Result]) -> list[str]:
    m = _index(main)
    rows, accs, worse, better, same = [], [], 0, 0, 0
    deltas = []
    for r in sorted(ctrl, key=lambda r: r["cell"]):
        if r.identity.variant != "uniform":
            continue
        base = m.get(_key(r))
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
        rows.append([r.identity.model, r.identity.objective, r.identity.budget, r.identity.search,
                     _layers(base["removed"]),
                     _layers(r["removed"]), _f(base["calibration_loss"], 4), _f(r["calibration_loss"], 4),
                     _f(d, 4), r["cost"]["evaluations"]])
        moved = sorted(r["removed"]) != sorted(base["removed"])
        accs.append([r.identity.model, r.identity.objective, r.identity.budget, r.identity.search, _acc_ci(base),
                     _acc_ci(r),
                     _delta(_paired(r, base)) if moved else "same set"])
    if not rows:
        return ["Not measured: needs the controls grid's uniform-prior cells and the main grid's ga/bo cells."]
    return ["GA and BO with the shared single-removal prior (main grid) and with a uniform one (control), the same "
            "evaluation limit (the uniform runs do not pay for the prior, so they score more M-sets). The sets and "
            "losses, then the average accuracies in % with 95% intervals (cluster bootstrap of each solution's "
            "items) and uniform's minus the prior's over the same items (paired bootstrap).", "",
            _table(rows, ["model", "objective", "M", "searcher", "prior: removes", "uniform: removes", "prior loss",
                          "uniform loss", "Δ loss", "uniform evals"], keys=4),
            "", _table(accs, ["model", "objective", "M", "searcher", "prior acc", "uniform acc",
                              "uniform − prior"], keys=4),
            "", f"**Finding.** Without the prior, the searcher found the same set in {same} of {len(rows)} runs, a "
                f"worse one in {worse} and a better one in {better}; median Δ loss {_f(statistics.median(deltas), 4)} "
                f"({'the prior helps' if worse > better else 'the prior does not help' if better > worse else 'no net effect of the prior'} "
                "at these evaluation limits)."]


def data_vs_loss(ctrl: list[Result], main: list[Result]) -> list[str]:
    """ppl@C4 (A), ppl@Commonsense (B, control), margin@Commonsense (C): which change moves the sets?"""
    m = _index(main)
    rows, accs, j_data, j_loss = [], [], [], []
    for r in sorted(ctrl, key=lambda r: r["cell"]):
        if r.identity.variant != "csdata":
            continue
        a = m.get((r.identity.model, "ppl", r.identity.search, r.identity.budget))
        cm = m.get((r.identity.model, "margin", r.identity.search, r.identity.budget))
        if a is None or cm is None:
            continue
        ja, jl = analysis.jaccard(a["removed"], r["removed"]), analysis.jaccard(r["removed"], cm["removed"])
        j_data.append(ja)
        j_loss.append(jl)
        rows.append([r.identity.model, r.identity.budget, r.identity.search, _layers(a["removed"]),
                     _layers(r["removed"]),
                     _layers(cm["removed"]), _f(ja, 2), _f(jl, 2)])
        accs.append([r.identity.model, r.identity.budget, r.identity.search, _acc_ci(a), _acc_ci(r), _acc_ci(cm)])
    if not rows:
        return ["Not measured: needs the controls grid's csdata cells and the main grid's ppl and margin cells."]
    ma, ml = statistics.mean(j_data), statistics.mean(j_loss)
    verdict = ("the **data** moves the removed sets more than the loss does" if ma < ml else
               "the **loss** moves the removed sets more than the data does" if ml < ma else
               "data and loss move the removed sets equally")
    return ["A = ppl on C4 (main grid), B = ppl on the margin's Commonsense-170k records (control: records joined "
            "into windows), C = margin on Commonsense-170k (main grid). A→B changes only the data, B→C only the "
            "loss. Jaccard overlap of the removed sets (1 = the same set); then each set's average accuracy in % "
            "with its 95% interval (cluster bootstrap of its items).", "",
            _table(rows, ["model", "M", "searcher", "A: ppl@C4", "B: ppl@CS", "C: margin@CS", "J(A,B) data",
                          "J(B,C) loss"], keys=3),
            "", _table(accs, ["model", "M", "searcher", "acc A", "acc B", "acc C"], keys=3),
            "", f"**Finding.** Mean Jaccard when only the data changes {ma:.2f}, when only the loss changes "
                f"{ml:.2f} ({len(rows)} searcher × model × budget cases): {verdict}."]


def seeds(ctrl: list[Result], main: list[Result]) -> list[str]:
    """Removed-set stability and metric spread across calibration seeds (0 from the main grid)."""
    m = _index(main)
    by: dict[Key, dict[int, Result]] = defaultdict(dict)
    for r in ctrl:
        cseed = r.identity.calibration_seed  # a calibration-seed block's cells all carry theirs
        if r.identity.variant != "default" or not _extra_seed(r):
            continue
        by[_key(r)][cseed] = r
    rows, acc_cells, per_searcher, spreads = [], [], defaultdict(list), []
    seed_ids: list[int] = []
    for key, runs in sorted(by.items()):
        base = m.get(key)
        if base is None:
            continue
        runs = {base.identity.calibration_seed: base, **runs}
        sets = [runs[s]["removed"] for s in sorted(runs)]
        accs = [a for s in sorted(runs) if (a := _acc(runs[s])) is not None]
        ppls = [runs[s]["metrics"].get("c4_ppl") for s in sorted(runs) if runs[s]["metrics"].get("c4_ppl")]
        jac = analysis.mean_pairwise_jaccard(sets)
        per_searcher[key[2]].append(jac)
        spread = 100 * (max(accs) - min(accs)) if len(accs) > 1 else None
        if spread is not None:
            spreads.append(spread)
        rows.append([key[0], key[1], key[3], key[2], " / ".join(_layers(s) for s in sets), _f(jac, 2), _f(spread, 1),
                     _f(max(ppls) / min(ppls) - 1, 3) if len(ppls) > 1 else "–"])
        seed_ids = sorted(set(seed_ids) | set(runs))
        acc_cells.append((key, {s: _acc_ci(runs[s]) for s in runs}))
    if not rows:
        return ["Not measured: needs the controls grid's calibration-seed cells and the main grid's cells."]
    across = []
    for model, objective, _search, budget in by:
        accs = [a for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget) and (a := _acc(r)) is not None]
        if len(accs) > 1:
            across.append(100 * (max(accs) - min(accs)))
    summary = "; ".join(f"{n} {statistics.mean(v):.2f}" for n, v in sorted(per_searcher.items(), key=lambda kv: analysis.searcher_rank(kv[0])))
    acc_rows = [[*key[:2], key[3], key[2], *(by_seed.get(s, "–") for s in seed_ids)] for key, by_seed in acc_cells]
    return ["Calibration seeds 0 (main grid), 1 and 2 (controls): the same searcher on three calibration samples of "
            "the same size. Stochastic searchers (ga) change their own seed with the calibration seed. Spread = max − "
            "min over the seeds (avg accuracy in points; C4 perplexity relative); the accuracies it spans follow, in % "
            "with 95% intervals (cluster bootstrap of each solution's items).", "",
            _table(rows, ["model", "objective", "M", "searcher", f"removed (seed {' / '.join(map(str, seed_ids))})",
                          "mean Jaccard", "acc spread", "c4 ppl spread"], keys=4),
            "", _table(acc_rows, ["model", "objective", "M", "searcher",
                                  *(f"avg acc, seed {s}" for s in seed_ids)], keys=4),
            "", f"**Finding.** Mean pairwise Jaccard of removed sets across calibration seeds, per searcher: {summary}. "
                f"The accuracy spread across seeds (median {statistics.median(spreads):.1f} points) compares with the "
                f"spread across the seven searchers on seed 0 in the same conditions (median "
                f"{statistics.median(across):.1f} points)" + (": a verdict about searchers that rests on accuracy "
                "differences smaller than the seed spread does not survive a new calibration sample."
                if across and statistics.median(spreads) >= statistics.median(across) else ".")]


def _counts(c: analysis.Correlation | None) -> bool:
    """A ρ that means something: defined, on enough distinct sets (the claims' min_distinct)."""
    return c is not None and not math.isnan(c.rho) and c.distinct >= analysis.MIN_DISTINCT_FOR_SPEARMAN


def _corr(c: analysis.Correlation | None) -> str:
    """ρ [95% bootstrap interval] (n distinct); too few distinct sets say so instead of a number."""
    if c is None:
        return "–"
    if not _counts(c):
        return f"too few ({c.distinct})"
    return f"{c.rho:+.2f} [{c.ci_low:+.2f}, {c.ci_high:+.2f}] ({c.distinct})"


def alignment_panel(ctrl: list[Result], main: list[Result]) -> list[str]:
    """Loss-vs-accuracy Spearman on the searchers' sets alone and with the rank panel beside them."""
    m = _index(main)
    panels: dict[tuple[str, str, int], list[Result]] = defaultdict(list)
    for r in ctrl:
        if r.identity.search == "rank" and not _extra_seed(r):
            panels[(r.identity.model, r.identity.objective, r.identity.budget)].append(r)
    rows, corr_rows = [], []
    rhos: defaultdict[str, defaultdict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    inside_total = panel_total = 0
    for (model, objective, budget), panel in sorted(panels.items()):
        searchers = [r for k, r in m.items() if (k[0], k[1], k[3]) == (model, objective, budget)]
        if not searchers:
            continue
        lo, hi = (min(r["calibration_loss"] for r in searchers), max(r["calibration_loss"] for r in searchers))
        plo, phi = (min(r["calibration_loss"] for r in panel), max(r["calibration_loss"] for r in panel))
        inside = [r for r in panel if lo <= r["calibration_loss"] <= hi]
        inside_total, panel_total = inside_total + len(inside), panel_total + len(panel)
        variants = {
            "searchers": analysis.alignment(searchers), "panel": analysis.alignment(panel),
            "searchers + panel": analysis.alignment(searchers + panel),
            "in range": analysis.alignment(searchers + inside),
            "searchers + panel, c4 ppl": analysis.alignment(searchers + panel, x="c4_ppl"),
        }
        for name, c in variants.items():
            if c is not None and _counts(c):
                rhos[objective][name].append(c.rho)
        rows.append([model, objective, budget, f"{_f(lo, 4)}–{_f(hi, 4)}", f"{_f(plo, 4)}–{_f(phi, 4)}",
                     len(inside), len(panel)])
        corr_rows.append([model, objective, budget, *(_corr(c) for c in variants.values())])
    if not rows:
        return ["Not measured: needs the controls grid's rank (panel) cells and the main grid's cells."]
    med = {o: {k: statistics.median(v) for k, v in d.items()} for o, d in rhos.items()}

    def say(o: str, k: str) -> str:
        return f"{med[o][k]:+.2f}" if k in med.get(o, {}) else "–"

    objectives = sorted(med)

    def both(k: str) -> bool:
        return all(k in med.get(o, {}) for o in ("ppl", "margin"))

    if both("searchers") and both("searchers + panel"):
        same = ((med["margin"]["searchers"] > med["ppl"]["searchers"])
                == (med["margin"]["searchers + panel"] > med["ppl"]["searchers + panel"]))
        direction = (" The panel " + ("keeps" if same else "reverses") + " the searchers-only ordering of the two "
                     "objectives (is ρ higher under margin than under ppl?).")
    elif both("panel"):
        higher = med["margin"]["panel"] > med["ppl"]["panel"]
        direction = (" No condition's searchers-only ρ rests on enough distinct sets to compare with. On the "
                     f"panel, ρ is {'higher' if higher else 'not higher'} under margin than under ppl "
                     f"({say('margin', 'panel')} against {say('ppl', 'panel')}): "
                     + ("the direction claim 5.3 states." if higher else "not the direction claim 5.3 states."))
    else:
        direction = ""
    direction += (f" {inside_total} of {panel_total} panel sets lie inside the searchers' loss range"
                  + (": every panel ρ rests on a wider range than the searchers', which the rule warned inflates "
                     "ρ." if inside_total == 0 else "."))
    return ["The alignment panel: per condition, the 12 removal sets at loss quantiles 0.04, 0.08, …, 0.48 of all "
            "M-sets (searcher `rank`; the rule is in `cases/controls.toml`), evaluated like any searcher's answer. "
            "ρ = Spearman(−calibration loss, avg accuracy) with a paired bootstrap 95% interval and, in "
            "parentheses, the distinct sets it rests on. The panel spans a wider loss range than the searchers "
            "(they sit near the optimum), and a wider range inflates ρ: 'in range' keeps only the panel sets "
            "inside the searchers' loss range. The last column uses C4 perplexity as the x axis, as claim 5.3 "
            "does. The searchers-only column is the main grid's own; the panel is beside it, not in its place.",
            "", _table(rows, ["model", "objective", "M", "searchers' loss range", "panel's loss range",
                              "panel in range", "panel sets"], keys=3),
            "", _table(corr_rows, ["model", "objective", "M", "ρ searchers", "ρ panel", "ρ searchers + panel",
                                   "ρ in range", "ρ c4 ppl (searchers + panel)"], keys=3),
            "", f"**Finding.** Median ρ per objective over the conditions whose ρ rests on ≥ "
                f"{analysis.MIN_DISTINCT_FOR_SPEARMAN} distinct sets — " + "; ".join(
                f"{o}: searchers {say(o, 'searchers')}, panel {say(o, 'panel')}, searchers + panel "
                f"{say(o, 'searchers + panel')}, in range {say(o, 'in range')}" for o in objectives) + "." + direction]


def claim_seed_spread(ctrl: list[Result], main: list[Result]) -> list[str]:
    """The main grid's claim verdicts with its seed-0 cells swapped for each extra calibration seed's."""
    from depthprune.report import claims
    from depthprune.report.claims import helpers

    by_seed: dict[int, list[Result]] = defaultdict(list)
    for r in ctrl:
        if r.identity.variant == "default" and _extra_seed(r):
            by_seed[r.identity.calibration_seed].append(r)
    if not by_seed or not main:
        return ["Not measured: needs the controls grid's calibration-seed cells and the main grid's cells."]
    grid = main[0].identity.grid
    base = {_key(r): r for r in helpers.select(main, claims.load_thresholds()["general"])}
    versions = {0: list(base.values())}
    swapped = {}
    for cseed, rows in sorted(by_seed.items()):
        version = dict(base)
        for r in rows:
            key = _key(r)
            if key in version:  # the seed cell stands in for the main cell (same identity otherwise)
                b = version[key]
                version[key] = r.replace(identity=dataclasses.replace(r.identity, grid=grid,
                                                                      calibration_seed=b.identity.calibration_seed,
                                                                      search_seed=b.identity.search_seed),
                                         grid_kind=b.get("grid_kind"))
        versions[cseed] = list(version.values())
        swapped[cseed] = sum(1 for r in rows if _key(r) in base)
    verdicts = {s: {v.claim.id: v for v in claims.judge_all(rows) if v.grid == grid} for s, rows in versions.items()}
    seeds_ = sorted(versions)
    table, flips, changed, judged = [], 0, [], 0
    for claim_id in claims.CLAIMS:
        got = [verdicts[s].get(claim_id) for s in seeds_]
        vs = [v for v in got if v is not None]
        if len(vs) < len(got):
            continue
        judged += 1
        outcomes = [v.outcome for v in vs]
        if len(set(outcomes)) > 1:
            flips += 1
            changed.append(claim_id)
        table.append([claim_id, "outcome", *(f"**{v.outcome}**" for v in vs)])
        names = list(dict.fromkeys(m.name for v in vs for m in v.measures))
        for name in names:
            ms = [next((x for x in v.measures if x.name == name), None) for v in vs]
            table.append(["", name, *("–" if m is None else _measure(m) for m in ms)])
            if any(m is not None and m.mde is not None for m in ms):
                table.append(["", f"{name}: MDE", *("–" if m is None else helpers.fmt(m.mde) for m in ms)])
    why = [line for cid in changed for line in (
        f"- **{cid}**:", *(f"  - seed {s}, {verdicts[s][cid].outcome}: {verdicts[s][cid].reason}." for s in seeds_))]
    return [f"Each claim judged on the `{grid}` grid as it is (calibration seed 0) and with its cells of searchers "
            f"{', '.join(sorted({r.identity.search for rows in by_seed.values() for r in rows}))} at "
            f"M = {', '.join(map(str, sorted({r.identity.budget for rows in by_seed.values() for r in rows})))} "
            f"replaced by the same cells on calibration seed {' and '.join(map(str, seeds_[1:]))} "
            f"({', '.join(f'{swapped[s]} cells' for s in seeds_[1:])}); the other cells stay as they are. "
            "Same thresholds. Per claim its outcome, then each number its verdict states, with its 95% interval "
            "in brackets and, on a row of its own, its minimum detectable effect (MDE), where the claim has them.",
            "", _table([[helpers.cell(x) for x in row] for row in table], ["claim", "statistic", *(f"seed {s}" for s in seeds_)],
                       keys=2),
            "", f"**Finding.** {flips} of {judged} verdicts change with the calibration sample"
                + (": those rest on a single draw of calibration data and should be read with that in mind."
                   if flips else ": every verdict survives a new calibration sample of the seeded cells."),
            *(["", "Why each verdict that changes does, seed by seed (the verdict's own words):", "", *why]
              if why else [])]


def _measure(m: Any) -> str:
    """A verdict's number as the claims tables write it: the value, its interval where it has one."""
    from depthprune.report.claims import helpers

    if m.low is None and m.high is None:
        return helpers.fmt(m.value)
    return f"{helpers.fmt(m.value)} [{helpers.fmt(m.low)}, {helpers.fmt(m.high)}]"


SECTIONS = (("Ground truth and chance", ground_truth), ("A structural baseline: Block Influence", structural),
            ("Prior ablation", prior_ablation), ("Data vs loss", data_vs_loss),
            ("Calibration seeds", seeds), ("Claim verdicts across calibration seeds", claim_seed_spread),
            ("Alignment panel", alignment_panel))


def render_controls(results: list[Result]) -> list[str]:
    """Every control grid's sections against its main grid; [] if there is no control grid."""
    lines: list[str] = []
    for grid in analysis.grids_of(r for r in results if is_control(r)):
        ctrl = [r for r in results if r.identity.grid == grid]
        main_name = ctrl[0].get("compare_with")
        main = [r for r in results if r.identity.grid == main_name and not is_control(r)]
        lines += [f"Controls grid `{grid}` ({len(ctrl)} cells) against the `{main_name}` grid ({len(main)} cells). "
                  "What the paper's text says it could not control (its last section), run here on the tiny "
                  "family.", ""]
        for title, section in SECTIONS:
            lines += [f"### {title}", "", *section(ctrl, main), ""]
    return lines

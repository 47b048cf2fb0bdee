"""Section 5.3: calibration perplexity ranks solutions as accuracy does under margin pruning only.

The statistic is a Spearman ρ between (minus) calibration perplexity and accuracy across each
condition's distinct solutions, corrected for the attenuation evaluation noise causes, pooled
per objective in Fisher's z. A condition's solutions are the paper's searchers' plus an
alignment panel's (``panel`` in claims.toml: more points of the same condition).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from depthprune.report import analysis
from depthprune.report import noise as report_noise
from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.results.schema import Result


def with_panel(rows: Sequence[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> list[Result]:
    """The paper's solutions of a grid and, at the same seeds, every cell (any variant) of the
    alignment panel's searchers (``t["panel"]``) under the two objectives."""
    chosen = helpers.select(rows, g)
    seeds = {(r.identity.calibration_seed, r.identity.search_seed) for r in chosen}
    panel = [r for r in rows if r.identity.search in t["panel"] and r not in chosen
             and r.identity.objective in (g["ppl_objective"], g["margin_objective"])
             and (r.identity.calibration_seed, r.identity.search_seed) in seeds]
    return chosen + panel


_AXES = ("c4_ppl", "calibration_loss")


def _reliability(values: np.ndarray, cov: np.ndarray | None) -> np.ndarray:
    """[...]: 1 − noise variance ÷ observed variance of ``values`` [..., n] across its n solutions
    (cov [..., n, n]; None: no noise, reliability 1)."""
    if cov is None:
        return np.ones(values.shape[:-1])
    n = values.shape[-1]
    centred = values - values.mean(-1, keepdims=True)
    observed = (centred ** 2).sum(-1) / (n - 1)
    noise = (np.trace(cov, axis1=-2, axis2=-1) - cov.sum((-2, -1)) / n) / (n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(observed > 0, 1 - noise / observed, -np.inf)


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row pair of x, y [..., n] (nan where a row is constant)."""
    rx, ry = stats.rankdata(x, axis=-1), stats.rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (rx * ry).sum(-1) / np.sqrt((rx ** 2).sum(-1) * (ry ** 2).sum(-1))


def _corrected_z(x, cx, y, cy, min_reliability: float) -> np.ndarray:
    """Fisher z of the attenuation-corrected Spearman ρ (nan where an axis's reliability is too low)."""
    rx, ry = _reliability(x, cx), _reliability(y, cy)
    rho = _spearman_rows(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        corrected = np.clip(rho / np.sqrt(np.maximum(rx * ry, 1e-12)), -0.99, 0.99)  # Fisher z is unbounded at ±1
    return np.where((rx >= min_reliability) & (ry >= min_reliability), np.arctanh(corrected), np.nan)


def _distinct_solutions(solutions: Sequence[Result], axis: str) -> list[Result]:
    """One result per distinct removed set that has ``axis`` and avg_acc (searcher order decides which)."""
    out: dict[frozenset[int], Result] = {}
    for r in sorted(solutions, key=lambda r: (analysis.searcher_rank(r.identity.search), r.identity.variant)):
        if helpers.metric(r, axis) is not None and helpers.metric(r, "avg_acc") is not None:
            out.setdefault(frozenset(r["removed"]), r)
    return list(out.values())


def _separable(solutions: Sequence[Result], axis: str, min_reliability: float) -> bool:
    """Does the evaluation separate these solutions on both axes (point reliability ≥ ``min_reliability``)?
    True where outcomes are missing: the verdict then says that the noise is unknown."""
    acc = helpers.blocks(solutions, "avg_acc")
    if acc is None:
        return True
    y, cy = report_noise.measure(acc)
    if axis == "c4_ppl":
        windows = helpers.blocks(solutions, "c4_ppl")
        if windows is None:
            return True
        x, cx = report_noise.measure(windows)
    else:
        x, cx = np.array([r["calibration_loss"] for r in solutions]), None
    return bool(_reliability(x, cx) >= min_reliability and _reliability(y, cy) >= min_reliability)


@register(Claim(
    "5.3", "5.3", "Introduction, observation (iii)",
    "calibration perplexity and downstream reasoning rankings show negative or weak correlations under "
    "perplexity pruning but positive correlations under task likelihood margin pruning (Section 5.3)",
    "ρ = Spearman(−x, avg accuracy) across a condition's distinct solutions, x = x_axis (C4 perplexity by "
    "default; the objective's own loss also reported), corrected for the evaluation noise's attenuation, "
    "pooled over an objective's conditions in Fisher's z, with an interval for solution sampling and "
    "evaluation noise: ppl's interval ≤ ppl_max_rho and margin's ≥ margin_min_rho; a condition counts "
    "with ≥ min_distinct distinct solutions (the searchers' and an alignment panel's) and reliability ≥ "
    "min_reliability",
    "ppl_max_rho", ("x_axis", "min_distinct", "min_reliability", "ppl_max_rho", "margin_min_rho", "panel",
                    "n_resamples", "seed", "confidence", "power"),
    reads_only_references=True,
    gist="rank ρ weak under ppl, positive under margin",
    rules=(Rule("rho_ppl", "ppl_max_rho", "CI high ≤ {}"), Rule("rho_margin", "margin_min_rho", "CI low ≥ {}")),
    select=with_panel))
def judge_5_3(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """Under ppl the better-perplexity solution is not the more accurate one; under margin it is.

    The verdict's x-axis is ``x_axis`` (default C4 perplexity: the paper says "calibration
    perplexity" under both objectives, and margin's own loss is no perplexity); ρ with the
    objective's own calibration loss is reported beside it. A condition's ρ is over its
    *distinct* solutions (seven searchers agreeing on a set are one point), and counts only with
    ≥ ``min_distinct`` of them.

    Noise cannot tilt it. Evaluation noise pulls a correlation toward 0, which would favour
    "weak" under ppl and disfavour "positive" under margin. So each condition's ρ is corrected
    for attenuation, ρ / √(R_x R_y), with each axis's reliability R = 1 − (noise variance across
    the solutions, from their per-item / per-window outcomes) ÷ (observed variance); a condition
    whose solutions the evaluation cannot separate (R < ``min_reliability`` on an axis) does not
    count. The conditions of an objective are pooled in Fisher's z (weights n − 3), and the
    interval holds both the solutions' own sampling (Spearman's SE 1.06/√(n − 3): at 7 points the
    critical ``|ρ|`` is ≈ 0.79) and the evaluation's (a bootstrap of its clusters, the same for every
    solution). Each half is decided only when its interval clears its threshold."""
    if t["x_axis"] not in _AXES:
        raise ValueError(f"[5.3] x_axis {t['x_axis']!r}: allowed {', '.join(_AXES)}")
    objectives = (g["ppl_objective"], g["margin_objective"])
    names = dict(zip(objectives, ("rho_ppl", "rho_margin")))
    th = {k: t[k] for k in ("x_axis", "min_distinct", "min_reliability", "ppl_max_rho", "margin_min_rho",
                            "panel", "confidence", "power")}
    conds: dict[tuple[str, str, int], list[Result]] = defaultdict(list)  # the searchers' and the panel's
    for r in rows:
        if r.identity.objective in objectives:
            conds[(r.identity.model, r.identity.objective, r.identity.budget)].append(r)
    conds = dict(sorted(conds.items()))
    details = [{"model": m, "objective": o, "budget": b} for (m, o, b) in conds]
    stat: dict[str, float | None] = {"rho_ppl": None, "rho_margin": None}
    outcome: dict[str, bool | None] = {}
    words, used, counted_total = [], [], 0
    most: dict[str, int] = {}
    for axis in (t["x_axis"], *(a for a in _AXES if a != t["x_axis"])):
        main = axis == t["x_axis"]
        groups = {key: _distinct_solutions(sols, axis) for key, sols in conds.items()}
        for row, key in zip(details, conds):
            row[f"distinct_{axis}"] = len(groups[key])
        if main:
            most = {o: max((len(v) for k, v in groups.items() if k[1] == o), default=0) for o in objectives}
        enough = [k for k, sols in groups.items() if len(sols) >= t["min_distinct"]]
        keys = [k for k in enough if _separable(groups[k], axis, t["min_reliability"])]  # bootstrap only these
        for row, key in zip(details, conds):
            if key in enough and key not in keys:
                row[f"counted_{axis}"] = False
        sols = [groups[k] for k in keys]
        acc = helpers.measured_groups(sols, "avg_acc", t["n_resamples"], t["seed"]) if sols and all(
            helpers.blocks(s, "avg_acc") is not None for s in sols) else None
        if axis == "c4_ppl":
            xs = helpers.measured_groups(sols, "c4_ppl", t["n_resamples"], t["seed"] + 1) if sols and all(
                helpers.blocks(s, "c4_ppl") is not None for s in sols) else None
        else:  # the objective's own calibration loss: exact for its calibration set, no evaluation noise
            xs = ([(np.array([r["calibration_loss"] for r in s]), None) for s in sols],
                  [(np.array([r["calibration_loss"] for r in s])[None, :], None) for s in sols])
        for o in objectives:
            idx = [i for i, k in enumerate(keys) if k[1] == o]
            label = names[o] if main else f"{names[o]} [{axis}]"
            if not idx or acc is None or xs is None:
                if main:
                    outcome[o] = None
                    why = (f"no condition with ≥ {t['min_distinct']} distinct solutions having {axis} and avg_acc "
                           f"(most distinct: {most[o]})" if not any(k[1] == o for k in enough) else
                           f"no condition whose solutions the evaluation separates (reliability ≥ "
                           f"{t['min_reliability']} on both axes)" if not idx else
                           "no per-item (or per-window) outcomes, so the evaluation's noise is unknown")
                    words.append(f"{o}: {why}: not measured")
                continue
            z_point, z_boot, weights = [], [], []
            for i in idx:
                (x, cx), (y, cy) = xs[0][i], acc[0][i]
                (bx, bcx), (by, bcy) = xs[1][i], acc[1][i]
                z = float(_corrected_z(-x, cx, y, cy, t["min_reliability"]))
                zb = _corrected_z(-bx, bcx, by, bcy, t["min_reliability"]) * np.ones(len(by))
                row = details[list(conds).index(keys[i])]
                row[f"rho_{axis}"] = float(_spearman_rows(-x, y))
                row[f"rho_{axis}_corrected"] = math.tanh(z) if math.isfinite(z) else None
                row[f"counted_{axis}"] = math.isfinite(z)
                if math.isfinite(z):
                    z_point.append(z)
                    z_boot.append(zb)
                    weights.append(len(x) - 3)
                    if main:
                        used += groups[keys[i]]
            if not z_point:
                if main:
                    outcome[o] = None
                    words.append(f"{o}: no condition whose solutions the evaluation separates (reliability ≥ "
                                 f"{t['min_reliability']} on both axes): not measured")
                continue
            w = np.array(weights, dtype=float)
            zbar = float(np.dot(w, z_point) / w.sum())
            boots = np.array(z_boot)  # [conditions, draws]; a draw whose condition lost its reliability: nan
            with np.errstate(invalid="ignore"):
                zbar_boot = np.nansum(boots * w[:, None], 0) / np.sum(np.where(np.isnan(boots), 0, w[:, None]), 0)
            se = math.sqrt(1.06 ** 2 / w.sum() + float(np.nanvar(zbar_boot, ddof=1)))
            zc = float(stats.norm.ppf(0.5 + t["confidence"] / 2))
            rho, low, high = math.tanh(zbar), math.tanh(zbar - zc * se), math.tanh(zbar + zc * se)
            mde = math.tanh(report_noise.z_sum(t["confidence"], t["power"]) * se)
            if not main:
                stat[label] = rho
                continue
            counted_total += len(z_point)
            stat.update({label: rho, f"{label}_low": low, f"{label}_high": high, f"{label}_mde": mde})
            threshold, side = (t["ppl_max_rho"], "<=") if o == g["ppl_objective"] else (t["margin_min_rho"], ">=")
            outcome[o] = helpers.decide(low, high, threshold, side)
            verdict_word = {None: "not measured", True: "weak or negative" if side == "<=" else "positive",
                            False: "not weak" if side == "<=" else "not positive"}[outcome[o]]
            words.append(f"{o}: ρ {rho:+.2f} [{low:+.2f}, {high:+.2f}] vs {'≤' if side == '<=' else '≥'} {threshold} "
                         f"({len(z_point)} cond., MDE {mde:.2f}): {verdict_word}")
    values = list(outcome.values())
    held = False if False in values else None if None in values or not values else True
    return verdict("5.3", grid, held, stat, th, counted_total, helpers.distinct(used),
                   f"x = {t['x_axis']}: " + "; ".join(words), details)

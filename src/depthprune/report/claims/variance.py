"""Section 5.2: searchers move perplexity less than the configuration does, accuracy as much.

The statistic is a two-way variance split of each (model, budget) pair's table, objective ×
searcher, with every sum of squares corrected by its expected evaluation noise and pooled over
the grid's pairs. :func:`depthprune.report.claims.variance.share_tables` (which solutions form a
pair's table) and :func:`depthprune.report.claims.variance.corrected_ss` (the corrected sums of
squares) are public because the variance table of REPORT.md
(:mod:`depthprune.report.variance`) shows the same shares per pair: one computation, two views.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from depthprune.report import noise
from depthprune.report.claims import helpers
from depthprune.report.claims.base import Claim, Rule, Verdict, register, verdict
from depthprune.results.schema import Result

#: the metrics 5.2 splits, each with the scale its variance is taken on
SHARE_METRICS: tuple[tuple[str, Callable[[float], float]], ...] = (("c4_ppl", math.log), ("avg_acc", lambda v: v))


class ShareTable(NamedTuple):
    """One (model, budget) pair's objective × searcher table: the searchers both objectives ran
    (with both metrics), and their solutions objective-major (ppl's searchers, then margin's)."""

    model: str
    budget: int
    searchers: list[str]
    solutions: list[Result]


def share_tables(rows: list[Result], g: Mapping[str, Any]) -> list[ShareTable]:
    """The pairs 5.2 splits, from a grid's selected solutions: those with at least ``min_searchers``
    searchers common to both objectives that have c4_ppl and avg_acc."""
    out = []
    for (model, budget), (ppl, margin) in helpers.pairs(rows, g).items():
        common = sorted(s for s in set(ppl) & set(margin)
                        if all(helpers.metric(side[s], m) is not None for side in (ppl, margin) for m, _ in SHARE_METRICS))
        if len(common) < g["min_searchers"]:
            continue
        out.append(ShareTable(model, budget, common, [side[s] for side in (ppl, margin) for s in common]))
    return out


@lru_cache(maxsize=32)
def projections(n_obj: int, n_srch: int) -> np.ndarray:
    """[P_objective, P_searcher, P_total] for an objective-major table: SS = yᵀPy."""
    n = n_obj * n_srch
    grand = np.full((n, n), 1 / n)
    by_obj = np.kron(np.eye(n_obj), np.full((n_srch, n_srch), 1 / n_srch))
    by_srch = np.kron(np.full((n_obj, n_obj), 1 / n_obj), np.eye(n_srch))
    return np.stack([by_obj - grand, by_srch - grand, np.eye(n) - grand])


def corrected_ss(y: np.ndarray, cov: np.ndarray, n_srch: int) -> np.ndarray:
    """[..., 3]: SS_objective, SS_searcher, SS_total of a pair's table (``y`` [..., cells], objective-
    major; ``cov`` [..., cells, cells] its noise covariance), each less its expected noise tr(PΣ)."""
    P = projections(y.shape[-1] // n_srch, n_srch)
    return np.einsum("...i,kij,...j->...k", y, P, y) - np.einsum("kij,...ij->...k", P, cov)


def share_gap_of(ss: np.ndarray) -> np.ndarray | float:
    """objective share − searcher share of pooled corrected sums of squares [..., 3] (nan: no variance left)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(ss[..., 2] > 0, (ss[..., 0] - ss[..., 1]) / ss[..., 2], np.nan)
    return float(out) if out.ndim == 0 else out


@register(Claim(
    "5.2", "5.2", "Introduction, observation (ii)",
    "performance variance across search algorithms is smaller in language modeling perplexity but "
    "comparable in downstream reasoning accuracy relative to the variation induced by the configuration "
    "(Section 5.2)",
    "two-way variance shares (objective × searcher), sums of squares less their expected evaluation noise "
    "and pooled over pairs, D = objective share − searcher share, with a bootstrap interval over the "
    "evaluation's items (windows): log C4 perplexity dominant if the lower bound ≥ ppl_min_gap; avg "
    "accuracy comparable if the interval lies within ±acc_max_gap; HELD only if both, NOT MEASURED "
    "while an interval straddles its threshold", "ppl_min_gap",
    ("ppl_min_gap", "acc_max_gap", "n_resamples", "seed", "confidence", "power"),
    reads_only_references=True,
    gist="searchers ≪ objective on ppl, ≈ on accuracy",
    rules=(Rule("D_c4_ppl", "ppl_min_gap", "CI low ≥ {}"), Rule("D_avg_acc", "acc_max_gap", "CI within ±{}"))))
def judge_5_2(grid: str, rows: list[Result], t: Mapping[str, Any], g: Mapping[str, Any]) -> Verdict:
    """The configuration dominates the variance of perplexity but only matches the searcher on
    accuracy.

    Noise cannot tilt it. Each solution's accuracy (perplexity) is a mean over items (windows)
    whose noise adds variance to every solution, which a two-way decomposition books largely
    to the searcher: with noise alone the searcher share grows and "comparable" holds. So the
    sums of squares are corrected by their expected noise, E[yᵀPy] = μᵀPμ + tr(PΣ), with Σ the
    solutions' noise covariance measured from their per-item and per-window outcomes
    (:mod:`depthprune.report.noise`, cluster-robust, paired), pooled over the grid's pairs, and
    each half is decided only by its interval (a bootstrap of the evaluation's clusters, the
    same for every solution): dominance needs the lower bound ≥ ppl_min_gap; "comparable"
    needs the whole interval within ±acc_max_gap (an equivalence test: noise widens the
    interval, and a wide interval decides nothing). An interval across the threshold is NOT
    MEASURED, with the minimum detectable effect. The seven searchers are the paper's set, not
    a sample: resampling seven levels with replacement biases the searcher share down (a draw
    holds ~4.6 distinct searchers), which would favour dominance whatever the data."""
    details: list[dict[str, Any]] = []
    used: list[Result] = []
    per_metric: dict[str, list[tuple[list[Result], int]]] = {m: [] for m, _ in SHARE_METRICS}
    for model, budget, common, solutions in share_tables(rows, g):
        row: dict[str, Any] = {"model": model, "budget": budget, "searchers": len(common)}
        for m, f in SHARE_METRICS:
            y = np.array([f(helpers.known(r, m)) for r in solutions])
            row[f"D_{m}_uncorrected"] = share_gap_of(corrected_ss(y, np.zeros((len(y), len(y))), len(common)))
            if helpers.blocks(solutions, m) is not None:
                per_metric[m].append((solutions, len(common)))
        details.append(row)
        used += solutions
    th = {k: t[k] for k in ("ppl_min_gap", "acc_max_gap", "n_resamples", "confidence", "power")}
    if not details:
        return verdict("5.2", grid, None, {"D_c4_ppl": None, "D_avg_acc": None}, th, 0, 0,
                       f"no (model, budget) with c4_ppl and avg_acc under both objectives for "
                       f"≥ {g['min_searchers']} common searchers")
    stat: dict[str, float | None] = {}
    decided: dict[str, bool | None] = {}
    words = []
    for m, threshold, side, yes, no in (("c4_ppl", t["ppl_min_gap"], ">=", "dominant", "not dominant"),
                                        ("avg_acc", t["acc_max_gap"], "within", "comparable", "not comparable")):
        name = "log c4 ppl" if m == "c4_ppl" else "avg acc"
        if not per_metric[m]:
            stat[f"D_{m}"], decided[m] = None, None
            words.append(f"{name}: no per-{'window' if m == 'c4_ppl' else 'item'} outcomes, so its noise is "
                         "unknown: not measured")
            continue
        groups = [sols for sols, _ in per_metric[m]]
        sizes = [n for _, n in per_metric[m]]
        point, boot = helpers.measured_groups(groups, m, t["n_resamples"], t["seed"])
        # c4_ppl's means are mean window NLLs, i.e. log perplexity; avg_acc's the tasks' mean accuracy
        estimate = share_gap_of(sum(corrected_ss(y, c, n) for (y, c), n in zip(point, sizes)))
        draws = share_gap_of(sum(corrected_ss(y, c, n) for (y, c), n in zip(boot, sizes)))
        low, high = helpers.interval(draws, t["confidence"])
        mde = helpers.mde(draws, t)
        stat.update({f"D_{m}": estimate, f"D_{m}_low": low, f"D_{m}_high": high, f"D_{m}_mde": mde})
        decided[m] = helpers.decide(low, high, threshold, side)
        bound = f"±{threshold}" if side == "within" else f"{threshold}"
        interval = f"D {estimate:+.2f} [{low:+.2f}, {high:+.2f}]"
        if decided[m] is None:
            words.append(f"{name}: {interval} straddles {bound}, MDE {mde:.2f}: not measured")
        else:
            words.append(f"{name}: {interval} vs {bound}, MDE {mde:.2f}: {yes if decided[m] else no}")
    mde_pts = grid_accuracy_mde(rows, t)
    if mde_pts is not None:
        stat["paired_mde_acc_pts"] = mde_pts
    values = list(decided.values())
    held = False if False in values else None if None in values else True
    return verdict("5.2", grid, held, stat, th, len(details), helpers.distinct(used), "; ".join(words), details)


def grid_accuracy_mde(rows: Sequence[Result], t: Mapping[str, Any]) -> float | None:
    """Median over conditions and their solution pairs of the paired accuracy MDE, in points."""
    mdes = []
    for _, by_search in helpers.conditions(rows).items():
        sols = list({frozenset(r["removed"]): r for r in by_search.values()}.values())
        if len(sols) < 2:
            continue
        blocks = helpers.blocks(sols, "avg_acc")
        if blocks is None:
            continue
        mdes += [100 * noise.paired_mde(blocks, a, b, t["confidence"], t["power"])
                 for a in range(len(sols)) for b in range(a + 1, len(sols))]
    return float(np.median(mdes)) if mdes else None


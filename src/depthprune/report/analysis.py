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
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from scipy import stats

from depthprune.grid.reference import jaccard  # one definition: the grid's check and the report share it
from depthprune.report.noise import outcome_bits
from depthprune.results.schema import Condition, Result

MIN_DISTINCT_FOR_SPEARMAN = 5


def searcher_rank(name: str) -> tuple[int, str]:
    """Table order: each registered searcher's ``order`` (cheap to dear), unknown names last."""
    from depthprune.search import SEARCHERS

    cls = SEARCHERS.get(name)
    return (cls.order if cls is not None else 1 << 30, name)


def grids_of(results: Iterable[Result]) -> list[str]:
    """The grids ``results`` come from, sorted (a result outside any grid, ``prune --json``, is none's)."""
    return sorted({r.identity.grid for r in results if r.identity.grid is not None})


def by_condition(results: Iterable[Result]) -> dict[Condition, list[Result]]:
    out: dict[Condition, list[Result]] = defaultdict(list)
    for r in results:
        out[r.condition].append(r)
    for rows in out.values():
        rows.sort(key=lambda r: (searcher_rank(r.identity.search), r.identity.search, r.identity.search_seed,
                                 r.identity.variant))
    return dict(sorted(out.items()))


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


def _spearman_along(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rho of ``a`` and ``b`` along ``axis``, for every resample at once: the Pearson
    correlation of their average ranks, as ``stats.spearmanr`` computes it (nan where one side is
    constant). The bootstrap calls it once instead of spearmanr 1,000 times: REPORT's regeneration
    spent 23 of its 48 s there (cProfile, 2026-12-02)."""
    ra = stats.rankdata(np.moveaxis(a, axis, -1), axis=-1)
    rb = stats.rankdata(np.moveaxis(b, axis, -1), axis=-1)
    ra -= ra.mean(axis=-1, keepdims=True)
    rb -= rb.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(axis=-1) / np.sqrt((ra * ra).sum(axis=-1) * (rb * rb).sum(axis=-1))
    return np.clip(rho, -1.0, 1.0)


def alignment(rows: Sequence[Result], metric: str = "avg_acc", seed: int = 0,
              x: str = "calibration_loss") -> Correlation | None:
    """Spearman(−x, accuracy) with a paired bootstrap 95% interval; x is the calibration loss or a
    metric of the result (e.g. "c4_ppl")."""
    def lower_is_better(r: Result) -> float | None:
        return r["calibration_loss"] if x == "calibration_loss" else r["metrics"].get(x)

    pts = [(lower_is_better(r), r["metrics"].get(metric)) for r in rows]
    pts = [(-a, b) for a, b in pts if a is not None and b is not None and math.isfinite(a) and math.isfinite(b)]
    if len(pts) < 3:
        return None
    xs, y = np.array(pts).T
    distinct = len({tuple(sorted(r["removed"])) for r in rows})
    if np.ptp(xs) == 0 or np.ptp(y) == 0:
        return Correlation(math.nan, math.nan, math.nan, math.nan, len(pts), distinct,
                           "undefined: every solution has the same loss or accuracy")
    res = stats.spearmanr(xs, y)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate resamples (ties) give nan; reported as such
        boot = stats.bootstrap((xs, y), _spearman_along, paired=True, vectorized=True, n_resamples=1000,
                               method="percentile", rng=np.random.default_rng(seed))
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


def variance_shares(rows: Sequence[Result], metric: str, transform=lambda v: v) -> VarianceShare | None:
    """Two-way decomposition (objective × searcher, one observation per cell) of ``metric``.

    SS_total = SS_objective + SS_searcher + SS_residual (interaction), from the balanced
    table of searchers present under every objective. Shares are SS / SS_total.
    """
    table: dict[tuple[str, str], float] = {}
    for r in rows:
        value = r["metrics"].get(metric) if metric != "calibration_loss" else r["calibration_loss"]
        if value is not None and math.isfinite(value):
            table[(r.identity.objective, r.identity.search)] = transform(value)
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


@dataclass(frozen=True)
class PairedDifference:
    """avg-acc(a) − avg-acc(b) over the same items, with a paired-bootstrap interval."""

    delta: float
    low: float
    high: float
    n_items: int

    @property
    def distinguishable(self) -> bool:
        """The interval excludes 0: the difference exceeds the evaluation's own noise."""
        return self.low > 0 or self.high < 0


def paired_difference(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]], tasks: Sequence[str],
                      headline: Any, n_resamples: int = 1000, confidence: float = 0.95,
                      seed: int = 0) -> PairedDifference | None:
    """Paired bootstrap of the headline-accuracy average over ``tasks`` between two solutions.

    ``a``/``b`` are result ``item_outcomes`` (task -> metric -> "0110..."). Items are resampled
    within each task with the *same* indices for both solutions, so what two solutions
    get right in common cancels: the interval is the noise of the difference, not of each
    accuracy (with 200–250 items a task's own standard error is ~3 points, far wider).
    None when either lacks a task's outcomes or the item lists differ in length.
    """
    per_task = []
    for task in tasks:
        metric = headline(task)
        xa, xb = a.get(task, {}).get(metric), b.get(task, {}).get(metric)
        if not xa or not xb or len(xa) != len(xb):
            return None
        per_task.append(outcome_bits(xa) - outcome_bits(xb))
    if not per_task:
        return None
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_resamples)
    for diff in per_task:
        idx = rng.integers(0, len(diff), size=(n_resamples, len(diff)))
        boots += diff[idx].mean(axis=1)
    boots /= len(per_task)
    delta = float(np.mean([d.mean() for d in per_task]))
    tail = (1 - confidence) / 2
    return PairedDifference(delta, float(np.quantile(boots, tail)), float(np.quantile(boots, 1 - tail)),
                            sum(len(d) for d in per_task))

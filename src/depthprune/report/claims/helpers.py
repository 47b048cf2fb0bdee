"""Selection and statistics the claims share, public so that other report modules use them too.

Selection follows the paper: the solutions counted are its default searcher parameters
(``variant`` "default"), its seven searchers, its two calibration configurations, and the
grid's lowest calibration and search seed (the paper ran one seed per setting). A *condition*
is (model, objective, budget); a *pair* is (model, budget) seen under both objectives.
Calibration perplexity is the evaluated C4 perplexity (``metrics["c4_ppl"]``), the one
perplexity every solution has whatever objective chose it; accuracy is ``avg_acc``. The
*distinct solutions* a verdict rests on are its distinct pruned models, (model, removed set):
seven searchers agreeing on one set are one solution, not seven.

The statistics decide by interval: a bootstrap of the evaluation's clusters
(:mod:`depthprune.report.noise`) gives each statistic's percentile interval and minimum
detectable effect, and a claim is decided only when the interval clears its threshold.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from depthprune.common.text_tables import significant
from depthprune.report import cells, noise
from depthprune.results.schema import Result

#: one per (model, objective, budget): searcher -> result
BySearch = dict[str, Result]
#: a group's (means [solutions], noise covariance [solutions, solutions]), measured or one bootstrap draw's
Measured = tuple[np.ndarray, np.ndarray]


# -- selection -------------------------------------------------------------------------------------

def by_grid(results: Iterable[Result]) -> dict[str, list[Result]]:
    """Results per grid, sorted by grid name; a result outside any grid goes under "(none)"."""
    out: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        out[r.identity.grid or "(none)"].append(r)
    return dict(sorted(out.items()))


def select(rows: Sequence[Result], g: Mapping[str, Any]) -> list[Result]:
    """The paper's solutions of one grid: default variant, its searchers and objectives, lowest seeds;
    one per (model, objective, budget, searcher) (the last one given wins)."""
    rows = [r for r in rows if r.identity.variant == "default" and r.identity.search in g["searchers"]
            and r.identity.objective in (g["ppl_objective"], g["margin_objective"])]
    if not rows:
        return []
    cal, srch = min(r.identity.calibration_seed for r in rows), min(r.identity.search_seed for r in rows)
    keep: dict[tuple[str, str, int, str], Result] = {}
    for r in rows:
        if r.identity.calibration_seed == cal and r.identity.search_seed == srch:
            keep[(r.identity.model, r.identity.objective, r.identity.budget, r.identity.search)] = r
    return list(keep.values())


def conditions(rows: Iterable[Result]) -> dict[tuple[str, str, int], BySearch]:
    """(model, objective, budget) -> searcher -> result."""
    out: dict[tuple[str, str, int], BySearch] = defaultdict(dict)
    for r in rows:
        out[(r.identity.model, r.identity.objective, r.identity.budget)][r.identity.search] = r
    return dict(sorted(out.items()))


def pairs(rows: Iterable[Result], g: Mapping[str, Any]) -> dict[tuple[str, int], tuple[BySearch, BySearch]]:
    """(model, budget) -> (ppl searcher -> result, margin searcher -> result), both objectives present."""
    conds = conditions(rows)
    out: dict[tuple[str, int], tuple[BySearch, BySearch]] = {}
    for (model, objective, budget), by_search in conds.items():
        if objective == g["ppl_objective"] and (model, g["margin_objective"], budget) in conds:
            out[(model, budget)] = (by_search, conds[(model, g["margin_objective"], budget)])
    return out


def distinct(rows: Iterable[Result]) -> int:
    """Distinct pruned models: (model, removed set)."""
    return len({(r.identity.model, frozenset(r["removed"])) for r in rows})


def metric(r: Mapping[str, Any], name: str) -> float | None:
    """A result's ``name`` (a metric, or ``calibration_loss``) as a float; None where missing or not finite."""
    value = r["calibration_loss"] if name == "calibration_loss" else (r.get("metrics") or {}).get(name)
    return float(value) if value is not None and math.isfinite(value) else None


def known(r: Mapping[str, Any], name: str) -> float:
    """:func:`depthprune.report.claims.helpers.metric` of a result already checked to have it."""
    value = metric(r, name)
    if value is None:
        raise ValueError(f"result {r.get('cell', '?')}: no finite {name}")
    return value


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman ρ, nan when either side is constant or has fewer than 3 points."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def median(values: Iterable[float]) -> float:
    """The median, as every claim summarises its conditions (one number, one threshold)."""
    return float(np.median(list(values)))


# -- the evaluation's noise: blocks, intervals, decisions ----------------------------------------

def headlines(r: Result) -> dict[str, str]:
    """task -> headline metric of the tasks a result's avg_acc averaged."""
    return dict(((r.get("evaluation_protocol") or {}).get("zero_shot") or {}).get("headline_metric") or {})


def blocks(solutions: Sequence[Result], name: str) -> list[noise.Outcomes] | None:
    """The solutions' outcome blocks for metric ``name`` (avg_acc: one per task; c4_ppl: the windows);
    None where a solution lacks them, so that the noise is unknown."""
    if name == "c4_ppl":
        return noise.window_blocks(solutions, "c4")
    heads = headlines(solutions[0])
    if not heads or any(headlines(r) != heads for r in solutions):
        return None
    return noise.accuracy_blocks(solutions, list(heads), heads.__getitem__)


def interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval; a bound that falls among undefined replicates (nan) is infinite."""
    alpha = (1 - confidence) / 2
    n = len(boot)
    finite = np.sort(boot[np.isfinite(boot)])
    k_low, k_high = int(math.floor(alpha * n)), int(math.ceil((1 - alpha) * n)) - 1
    missing = n - len(finite)  # undefined replicates could lie anywhere: count them as ±inf
    low = finite[k_low - missing] if k_low - missing >= 0 and len(finite) else -math.inf
    high = finite[k_high] if k_high < len(finite) else math.inf
    return float(low), float(high)


def decide(low: float, high: float, threshold: float, side: str) -> bool | None:
    """The claim's side of ``threshold`` (True), the other (False) or undecided (None), by interval.
    side ">=": statistic ≥ threshold; "<=": ≤; "within": ``abs(statistic)`` ≤ threshold."""
    if side == ">=":
        return True if low >= threshold else False if high < threshold else None
    if side == "<=":
        return True if high <= threshold else False if low > threshold else None
    return True if -threshold <= low and high <= threshold else False if low > threshold or high < -threshold else None


def mde(boot: np.ndarray, t: Mapping[str, Any]) -> float:
    """(z_{1−α/2} + z_power) × the bootstrap SE: the smallest departure from a threshold detected at ``power``.
    The SE is read off the percentile interval (its width ÷ 2 z_{1−α/2}), which a ratio's rare blow-ups
    do not inflate as they inflate a standard deviation; an unbounded interval gives an infinite MDE."""
    low, high = interval(boot, t["confidence"])
    se = (high - low) / (2 * float(stats.norm.ppf(0.5 + t["confidence"] / 2)))
    return noise.z_sum(t["confidence"], t["power"]) * se


#: measured_groups' answers by the identity of the results it measured (results are read-only), each kept with
#: those results so that no identity is reused while its answer is kept; at most MEASURED_KEPT, oldest out
_MEASURED: dict[tuple[Any, ...], tuple[Sequence[list[Result]], tuple[list[Measured], list[Measured]]]] = {}
MEASURED_KEPT = 256


def measured_groups(groups: Sequence[list[Result]], name: str, n_resamples: int,
                    seed: int) -> tuple[list[Measured], list[Measured]]:
    """Each group's (means, noise covariance) as measured, and as ``n_resamples`` bootstrap draws
    of the evaluation's clusters: one draw for all groups when they were evaluated on the same
    items (the same draw for every solution of the grid), else a draw per group. A report asks for the
    same groups again (each threshold of a claim's sensitivity, each firmness re-judgement): the same
    results, name, size and seed give the same arrays, so they are computed once (a report of the committed
    archives asked 114 times for 48 distinct ones, 11 s of its 64)."""
    key = (tuple(tuple(map(id, sols)) for sols in groups), name, n_resamples, seed)
    if key in _MEASURED:
        return _MEASURED[key][1]
    answer = _measure_groups(groups, name, n_resamples, seed)
    for arrays in (*answer[0], *answer[1]):  # shared from now on: a caller that wrote into one would raise
        for a in arrays:
            a.flags.writeable = False
    if len(_MEASURED) >= MEASURED_KEPT:
        del _MEASURED[next(iter(_MEASURED))]
    _MEASURED[key] = (groups, answer)
    return answer


def _measure_groups(groups: Sequence[list[Result]], name: str, n_resamples: int,
                    seed: int) -> tuple[list[Measured], list[Measured]]:
    flat = [r for sols in groups for r in sols]
    joint = blocks(flat, name)
    offsets = np.cumsum([0] + [len(sols) for sols in groups])
    if joint is not None:
        y, cov = noise.measure(joint)
        cols = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(groups))]
        return [(y[c], cov[np.ix_(c, c)]) for c in cols], noise.bootstrap(joint, n_resamples, seed, cols)
    point: list[Measured] = []
    boot: list[Measured] = []
    for k, sols in enumerate(groups):
        blk = blocks(sols, name)
        if blk is None:
            raise ValueError(f"a group of {len(sols)} solutions without {name} outcomes: check blocks() first")
        point.append(noise.measure(blk))
        boot += noise.bootstrap(blk, n_resamples, seed + k)
    return point, boot


# -- formatting --------------------------------------------------------------------------------------

def fmt(value: Any) -> str:
    """A number as the claims' tables write it (:func:`depthprune.common.text_tables.significant`)."""
    return significant(value)


def fmt_dict(d: Mapping[str, Any]) -> str:
    """``k = v; …`` with each value as :func:`depthprune.report.claims.helpers.fmt` writes it."""
    return "; ".join(f"{k} = {fmt(v)}" for k, v in d.items())


def cell(value: Any) -> str:
    """A markdown table cell: a literal | would end the cell."""
    return str(value).replace("|", "\\|")



def table(rows: list[list[Any]], headers: list[str]) -> str:
    """A markdown table as every report table is written (:func:`depthprune.report.cells.table`)."""
    return cells.table(rows, headers)

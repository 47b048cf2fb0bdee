"""Objective vs searcher: shares of variance, noise-corrected as claim 5.2 judges them.

Evaluation noise adds variance to every solution, and a two-way decomposition books most of it to
the searcher: uncorrected shares overstate what the searcher explains. Claim 5.2 therefore
subtracts each sum of squares' expected noise, tr(PΣ), with Σ measured from the solutions' own
per-item and per-window outcomes (:func:`depthprune.report.claims.variance.corrected_ss`). This table
shows those corrected shares per (model, budget), the uncorrected ones beside them, and the
pooled figure the verdict compares with its threshold, computed by the verdict's own functions
on the verdict's own solutions (the paper's seven searchers, both objectives, lowest seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from depthprune.report import claims, noise
from depthprune.report.claims import helpers
from depthprune.report.claims import variance as claim_variance
from depthprune.results.schema import Result

METRICS = (("c4_ppl", "log C4 perplexity", math.log), ("avg_acc", "avg accuracy", lambda v: v))


@dataclass(frozen=True)
class Shares:
    """One table's variance split: objective, searcher, interaction (shares of the total), and n."""

    objective: float
    searcher: float
    interaction: float

    @classmethod
    def of(cls, ss: np.ndarray) -> Shares:
        """From [SS_objective, SS_searcher, SS_total] (nan shares when no variance is left)."""
        if not ss[2] > 0:
            return cls(math.nan, math.nan, math.nan)
        obj, srch = float(ss[0] / ss[2]), float(ss[1] / ss[2])
        return cls(obj, srch, 1 - obj - srch)

    @property
    def gap(self) -> float:
        """D = objective share − searcher share, the number 5.2 judges."""
        return self.objective - self.searcher


@dataclass(frozen=True)
class ShareRow:
    grid: str
    model: str  # "pooled" for the grid's pooled row
    budget: int | None
    metric: str
    corrected: Shares | None  # None: no per-item (per-window) outcomes, so the noise is unknown
    uncorrected: Shares
    n: int


def share_rows(results: Sequence[Result], thresholds: Mapping[str, Any] | None = None) -> list[ShareRow]:
    """Per grid, (model, budget) and metric the shares, then per grid and metric the pooled row; the
    pairs and their sums of squares are 5.2's own (:func:`depthprune.report.claims.variance.share_tables`,
    :func:`depthprune.report.claims.variance.corrected_ss`)."""
    t = thresholds if thresholds is not None else claims.load_thresholds()
    g = t["general"]
    rows: list[ShareRow] = []
    for grid, grid_rows in helpers.by_grid(results).items():
        pooled: dict[str, list[np.ndarray]] = {m: [] for m, _, _ in METRICS}
        raw_pooled: dict[str, list[np.ndarray]] = {m: [] for m, _, _ in METRICS}
        for model, budget, common, solutions in claim_variance.share_tables(helpers.select(grid_rows, g), g):
            for metric, label, f in METRICS:
                blocks = helpers.blocks(solutions, metric)
                corrected: Shares | None = None
                if blocks is not None:
                    y, cov = noise.measure(blocks)  # c4: mean window NLL = log perplexity
                    ss, raw = claim_variance.corrected_ss(y, cov, len(common)), claim_variance.corrected_ss(y, np.zeros_like(cov), len(common))
                    pooled[metric].append(ss)
                    raw_pooled[metric].append(raw)
                    corrected = Shares.of(ss)
                else:
                    y = np.array([f(helpers.known(r, metric)) for r in solutions])
                    raw = claim_variance.corrected_ss(y, np.zeros((len(y), len(y))), len(common))
                rows.append(ShareRow(grid, model, budget, label, corrected, Shares.of(raw), len(solutions)))
        for metric, label, _ in METRICS:
            if pooled[metric]:
                rows.append(ShareRow(grid, "pooled", None, label, Shares.of(sum(pooled[metric])),
                                     Shares.of(sum(raw_pooled[metric])), len(pooled[metric])))
    return rows

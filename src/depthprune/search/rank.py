"""Rank: the removal set at a fixed quantile of the loss order of every M-set.

Not a search for the best set: it enumerates every M-set (as ``exhaustive`` does, so it is
only for small C(L, M)) and returns the one whose loss rank is the ``q``-quantile -- q = 0 is
the optimum, q = 0.5 the median set, q = 1 the worst. The controls grid uses it for the
alignment panel: sets at loss ranks fixed in advance, evaluated like any searcher's answer,
so that a loss-vs-accuracy correlation rests on enough distinct sets whose spread in loss is
chosen by a rule rather than by which searchers happened to run. Within one condition its
enumeration shares the calibration memo with ``exhaustive`` (no extra scoring there); its
cost is still counted as if it ran alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from depthprune.params import check_ints
from depthprune.search.base import SearchContext, Searcher, rank_key, register, set_key
from depthprune.search.exhaustive import score_every_set


@register
@dataclass
class RankSearcher(Searcher):
    """The M-set at loss quantile ``q`` of all M-sets (ties broken by the sorted set).

    Attributes:
        q: quantile of the loss order, in [0, 1]; the index is round(q · (n − 1)) over the
            n sets with a finite loss (sets with nan/inf rank after every finite one and are
            only returned when no set is finite). 0.0 (ours): the optimum.
        max_sets: refuse to enumerate more than this many sets (as ``exhaustive``).
        batch_size: sets per scoring batch (neighbouring sets share prefixes).
    """

    name: ClassVar[str] = "rank"
    order: ClassVar[int] = 10  # position in report tables
    q: float = 0.0
    max_sets: int = 1_000_000
    batch_size: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.q, bool) or not isinstance(self.q, (int, float)) or not 0.0 <= self.q <= 1.0:
            raise ValueError(f"rank: q must be a number in [0, 1], got {self.q!r}")
        check_ints("rank", self, {"max_sets": 1, "batch_size": 1})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        return math.comb(n_layers - n_protected, budget)

    def run(self, ctx: SearchContext) -> frozenset[int]:
        scored = sorted(score_every_set(ctx, self.name, self.max_sets, self.batch_size), key=lambda sl: set_key(*sl))
        finite = sum(1 for _, loss in scored if math.isfinite(rank_key(loss))) or len(scored)
        return scored[round(self.q * (finite - 1))][0]

"""Random subsets: the chance baseline every searcher is measured against.

Scores ``n_sets`` distinct M-sets drawn uniformly (seeded) and returns the best. Its trace
is a sample of what an *unsearched* removal set costs, so the report reads chance from it
(the median loss of the sample) and the best-of-``n_sets`` as plain random search. It uses
no prior and no model internals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import Bounds, SearchContext, Searcher, argmin_set, register


@register
@dataclass
class RandomSetsSearcher(Searcher):
    """Best of ``n_sets`` uniformly random removal sets.

    Attributes:
        n_sets: distinct random M-sets scored; 32 (ours: a median from 32 draws is within
            ~±0.2 of the population median's quantile, enough to place searchers against chance).
    """

    name: ClassVar[str] = "random"
    order: ClassVar[int] = 8  # position in report tables
    stochastic: ClassVar[bool] = True
    batch_decides: ClassVar[bool] = False  # its batches are chunks, not choices (Searcher)
    n_sets: int = 32

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.n_sets, bool) or not isinstance(self.n_sets, int) or self.n_sets < 1:
            raise ValueError(f"random: n_sets must be an integer >= 1, got {self.n_sets!r}")

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """``n_sets`` distinct M-sets, no prior."""
        k = min(self.n_sets, math.comb(n_layers, budget))
        return Bounds(k, k, {budget: k})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        bound = min(self.n_sets, math.comb(n_layers - n_protected, budget))
        return bound if self.max_evaluations is None else min(bound, self.max_evaluations)

    def run(self, ctx: SearchContext) -> frozenset[int]:
        space = math.comb(len(ctx.candidates), ctx.budget)
        target = min(self.n_sets, space)
        drawn: list[frozenset[int]] = []
        seen: set[frozenset[int]] = set()
        while len(drawn) < target:
            s = frozenset(ctx.rng.sample(ctx.candidates, ctx.budget))
            if s not in seen:
                seen.add(s)
                drawn.append(s)
        return argmin_set(ctx, drawn)[0]

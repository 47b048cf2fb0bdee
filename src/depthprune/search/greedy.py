"""Greedy iterative deletion (SLEB, Song et al. 2024).

Start from the dense model; M times, remove the layer whose removal (given the ones
already removed) gives the lowest loss. Each step's candidates are scored as one batch,
so the scoring engine can share the prefix that all of them have in common.
Cost: about M*L evaluations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import Bounds, SearchContext, Searcher, argmin_set, register


@register
@dataclass
class GreedySearcher(Searcher):
    name: ClassVar[str] = "greedy"
    order: ClassVar[int] = 1  # position in report tables

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """Step k scores the base plus every other layer."""
        sizes = {k + 1: n_layers - k for k in range(budget)}
        return Bounds(sum(sizes.values()), sum(sizes.values()), sizes)

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        n = n_layers - n_protected
        return sum(n - k for k in range(budget))

    def run(self, ctx: SearchContext) -> frozenset[int]:
        removed: frozenset[int] = frozenset()
        for _ in range(ctx.budget):
            options = [removed | {i} for i in ctx.candidates if i not in removed]
            removed, _loss = argmin_set(ctx, options)
        return removed

"""Greedy iterative deletion (SLEB, Song et al. 2024).

Start from the dense model; M times, remove the layer whose removal (given the ones
already removed) gives the lowest loss. Each step's candidates are scored as one batch,
so the scoring engine can share the prefix that all of them have in common.
Cost: about M*L evaluations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import SearchContext, Searcher, argmin_set, register


@register
@dataclass
class GreedySearcher(Searcher):
    name: ClassVar[str] = "greedy"
    order: ClassVar[int] = 1  # position in report tables

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        n = n_layers - n_protected
        return sum(n - k for k in range(budget))

    def run(self, ctx: SearchContext) -> frozenset[int]:
        removed: frozenset[int] = frozenset()
        for _ in range(ctx.budget):
            options = [removed | {i} for i in ctx.candidates if i not in removed]
            removed, _loss = argmin_set(ctx, options)
        return removed

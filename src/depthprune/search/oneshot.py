"""One-shot top-k: remove the M layers whose single removal hurts least.

ShortGPT-style ranking, but ranked by the objective itself (f({i})) rather than by a
cosine-similarity proxy, so that the searcher comparison holds the objective fixed.
Cost: L single-layer evaluations (the shared prior) plus one for the chosen set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import Bounds, SearchContext, Searcher, register


@register
@dataclass
class OneShotSearcher(Searcher):
    name: ClassVar[str] = "oneshot"
    order: ClassVar[int] = 0  # position in report tables

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """The prior's singles, then the chosen set (already a single when M = 1)."""
        sizes = {1: n_layers, **({budget: 1} if budget > 1 else {})}
        return Bounds(sum(sizes.values()), sum(sizes.values()), sizes)

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        return n_layers - n_protected + 1

    @classmethod
    def turned_cut_answer(cls, removed: Sequence[int], chosen: Sequence[int], rival: Sequence[int]
                          ) -> tuple[int, ...] | None:
        """The answer is the prior's cut: turned, its two singles swap."""
        return tuple(sorted(set(removed) - set(chosen) | set(rival)))

    def run(self, ctx: SearchContext) -> frozenset[int]:
        prior = ctx.prior()
        ranked = sorted(ctx.candidates, key=lambda i: (prior[i], i))
        return frozenset(ranked[: ctx.budget])

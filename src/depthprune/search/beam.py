"""Beam search over removal sets (greedy with B > 1 partial solutions).

Definition (DESIGN.md, searcher table): start from the dense model (the empty set);
for each size k = 1..M, expand each of the kept sets by every remaining removable
layer, drop duplicates (the same set reached from two parents is one candidate), score
all new candidates as one batch, and keep the ``beam_width`` best of that size (ties:
the lexicographically smaller sorted set, as everywhere in depthprune). The answer is
the best set of size M. With ``beam_width=1`` this is exactly ``greedy`` (SLEB).

Cost: at most sum_k min(C(L', k), B * (L' - k + 1)) evaluations, L' the removable
layers; about M*B*L.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import Bounds, SearchContext, Searcher, register, set_key


@register
@dataclass
class BeamSearcher(Searcher):
    """Beam search.

    Attributes:
        beam_width: B, the number of sets of each size kept for expansion. Default 4,
            the value in DESIGN.md's searcher table (``≈ M·B·L, B=4``); B=1 is greedy.
    """

    name: ClassVar[str] = "beam"
    order: ClassVar[int] = 2  # position in report tables
    beam_width: int = 4

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.beam_width, bool) or not isinstance(self.beam_width, int) or self.beam_width < 1:
            raise ValueError(f"beam: beam_width must be a positive integer, got {self.beam_width!r}")

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """Step 1: the singles; after: B parents x new layers, and a pair of parents shares <= 1 child."""
        n = n_layers
        low, sizes, width = n, {1: n}, n
        for k in range(2, budget + 1):
            parents = min(self.beam_width, width)
            children = parents * (n - k + 1)
            sizes[k] = min(math.comb(n, k), children)
            low += max(n - k + 1, children - math.comb(parents, 2))
            width = sizes[k]
        return Bounds(low, sum(sizes.values()), sizes)

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        n = n_layers - n_protected
        steps = sum(min(math.comb(n, k), self.beam_width * (n - k + 1)) for k in range(1, budget + 1))
        return max(steps, 1)  # budget 0 still scores the empty set once

    def run(self, ctx: SearchContext) -> frozenset[int]:
        beam: list[frozenset[int]] = [frozenset()]
        for _ in range(ctx.budget):
            options = sorted(
                {s | {i} for s in beam for i in ctx.candidates if i not in s},
                key=lambda s: tuple(sorted(s)),
            )
            losses = ctx.score_many(options)
            ranked = sorted(zip(options, losses), key=lambda sl: set_key(*sl))
            beam = [s for s, _ in ranked[: self.beam_width]]
        return beam[0]

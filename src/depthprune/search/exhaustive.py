"""Exhaustive search: every M-subset of the removable layers (ground truth).

Only feasible where C(L, M) is small; ``max_sets`` guards against asking for a
combinatorial explosion by accident. Sets are scored in batches of ``batch_size`` so the
scoring engine can share prefixes between lexicographically neighbouring sets.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import SearchContext, Searcher, register, set_key


@register
@dataclass
class ExhaustiveSearcher(Searcher):
    name: ClassVar[str] = "exhaustive"
    order: ClassVar[int] = 9  # position in report tables
    max_sets: int = 1_000_000
    batch_size: int = 256

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        return math.comb(n_layers - n_protected, budget)

    def run(self, ctx: SearchContext) -> frozenset[int]:
        total = math.comb(len(ctx.candidates), ctx.budget)
        if total > self.max_sets:
            raise ValueError(
                f"exhaustive: C({len(ctx.candidates)}, {ctx.budget}) = {total} sets exceeds "
                f"max_sets={self.max_sets}; raise max_sets or use another searcher"
            )
        best: tuple[tuple[float, tuple[int, ...]], frozenset[int]] | None = None
        combos = itertools.combinations(ctx.candidates, ctx.budget)
        while chunk := [frozenset(c) for c in itertools.islice(combos, self.batch_size)]:
            for s, loss in zip(chunk, ctx.score_many(chunk)):
                key = set_key(s, loss)
                if best is None or key < best[0]:
                    best = (key, s)
        assert best is not None
        return best[1]

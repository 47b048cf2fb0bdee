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

from depthprune.common.params import check_ints
from depthprune.search.base import Bounds, SearchContext, Searcher, register, set_key


@register
@dataclass
class ExhaustiveSearcher(Searcher):
    name: ClassVar[str] = "exhaustive"
    order: ClassVar[int] = 9  # position in report tables
    batch_decides: ClassVar[bool] = False  # its batches are chunks, not choices (Searcher)
    max_sets: int = 1_000_000
    batch_size: int = 256

    def __post_init__(self) -> None:
        super().__post_init__()
        check_ints("exhaustive", self, {"max_sets": 1, "batch_size": 1})

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """Every M-set."""
        space = math.comb(n_layers, budget)
        return Bounds(space, space, {budget: space})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        return math.comb(n_layers - n_protected, budget)

    def run(self, ctx: SearchContext) -> frozenset[int]:
        return min(score_every_set(ctx, self.name, self.max_sets, self.batch_size), key=lambda sl: set_key(*sl))[0]


def score_every_set(ctx: SearchContext, name: str, max_sets: int, batch_size: int) -> list[tuple[frozenset[int], float]]:
    """Every M-set of the candidates with its loss, scored in lexicographic batches of ``batch_size``;
    a ValueError naming ``name`` when there are more than ``max_sets``."""
    total = math.comb(len(ctx.candidates), ctx.budget)
    if total > max_sets:
        raise ValueError(f"{name}: C({len(ctx.candidates)}, {ctx.budget}) = {total} sets exceeds "
                         f"max_sets={max_sets}; raise max_sets or use another searcher")
    out: list[tuple[frozenset[int], float]] = []
    combos = itertools.combinations(ctx.candidates, ctx.budget)
    while chunk := [frozenset(c) for c in itertools.islice(combos, batch_size)]:
        out += zip(chunk, ctx.score_many(chunk))
    return out

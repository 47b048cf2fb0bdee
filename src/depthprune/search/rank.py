"""Rank: the removal set at a fixed quantile of the loss order of every M-set (or of a sample).

Not a search for the best set: it enumerates every M-set (as ``exhaustive`` does, so it is
only for small C(L, M)) and returns the one whose loss rank is the ``q``-quantile -- q = 0 is
the optimum, q = 0.5 the median set, q = 1 the worst. Where the M-sets cannot be enumerated
(C(30, 7) = 2,035,800), ``sample`` > 0 ranks a uniform random sample of that many distinct
M-sets instead, drawn with ``random.Random(sample_seed)``: every cell of a panel with one
``sample_seed`` ranks the same sample, so within a condition the sets are scored once (the
calibration memo is shared) and the panel's quantiles are of one sample. The controls grid uses it for the
alignment panel: sets at loss ranks fixed in advance, evaluated like any searcher's answer,
so that a loss-vs-accuracy correlation rests on enough distinct sets whose spread in loss is
chosen by a rule rather than by which searchers happened to run. Within one condition its
enumeration shares the calibration memo with ``exhaustive`` (no extra scoring there); its
cost is still counted as if it ran alone.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import ClassVar

from depthprune.common.params import check_ints
from depthprune.search.base import Bounds, SearchContext, Searcher, rank_key, register, set_key
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
        sample: 0 (default) ranks every M-set; n > 0 ranks n distinct uniform random M-sets.
        sample_seed: the sample's seed (not the search seed: one panel, one sample).
    """

    name: ClassVar[str] = "rank"
    order: ClassVar[int] = 10  # position in report tables
    batch_decides: ClassVar[bool] = False  # its batches are chunks, not choices (Searcher)
    q: float = 0.0
    max_sets: int = 1_000_000
    batch_size: int = 256
    sample: int = 0
    sample_seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.q, bool) or not isinstance(self.q, (int, float)) or not 0.0 <= self.q <= 1.0:
            raise ValueError(f"rank: q must be a number in [0, 1], got {self.q!r}")
        check_ints("rank", self, {"max_sets": 1, "batch_size": 1, "sample": 0, "sample_seed": 0})

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """Every M-set, or its ``sample`` of them."""
        space = math.comb(n_layers, budget)
        k = min(self.sample, space) if self.sample else space
        return Bounds(k, k, {budget: k})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        total = math.comb(n_layers - n_protected, budget)
        return min(self.sample, total) if self.sample else total

    def run(self, ctx: SearchContext) -> frozenset[int]:
        if self.sample:
            sets = sample_sets(ctx.candidates, ctx.budget, self.sample, self.sample_seed)
            scored: list[tuple[frozenset[int], float]] = []
            for start in range(0, len(sets), self.batch_size):
                chunk = sets[start:start + self.batch_size]
                scored += zip(chunk, ctx.score_many(chunk))
        else:
            scored = score_every_set(ctx, self.name, self.max_sets, self.batch_size)
        scored = sorted(scored, key=lambda sl: set_key(*sl))
        finite = sum(1 for _, loss in scored if math.isfinite(rank_key(loss))) or len(scored)
        return scored[round(self.q * (finite - 1))][0]


def sample_sets(candidates, budget: int, n: int, seed: int) -> list[frozenset[int]]:
    """``n`` distinct uniform random ``budget``-subsets of ``candidates`` (all of them when there are
    no more than ``n``), in a seeded order sorted for prefix sharing."""
    pool = sorted(candidates)
    total = math.comb(len(pool), budget)
    if total <= n:
        return [frozenset(c) for c in itertools.combinations(pool, budget)]
    rng = random.Random(seed)
    seen: set[frozenset[int]] = set()
    while len(seen) < n:
        seen.add(frozenset(rng.sample(pool, budget)))
    return sorted(seen, key=sorted)

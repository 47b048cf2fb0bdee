"""Block Influence: the structural ranking the paper argues against (a control, not a search).

ShortGPT (Men et al. 2024) ranks blocks by how little they change their input:
BI_i = 1 − mean over tokens of cos(x_i, x_{i+1}), x_i the hidden state entering block i,
measured on the dense model over the calibration data; the M blocks of lowest BI are
removed. ``metric="angular"`` uses the angular distance arccos(cos)/π instead (Gromov et
al. 2024 rank by it). No calibration loss guides the choice: the chosen set is scored once,
only so that its loss is reported beside the searchers'.

The ranking needs hidden states, so ``score`` must offer ``score.block_influence(metric)``
(the scoring engine, :class:`depthprune.scoring.scorer.Scorer`, does; duck-typed like
``score.energy`` for cbo). A plain loss callable cannot rank blocks structurally, and is
refused with a clear error rather than silently ranked some other way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from depthprune.search.base import Bounds, Planned, SearchContext, Searcher, register

METRICS = ("cosine", "angular")


@register
@dataclass
class BlockInfluenceSearcher(Searcher):
    """Remove the M blocks whose output is most similar to their input.

    Attributes:
        metric: "cosine" (ShortGPT's Block Influence, 1 − cos) or "angular"
            (arccos(cos)/π); "cosine" (ShortGPT's).
    """

    name: ClassVar[str] = "bi"
    not_recountable: ClassVar[str] = "it ranks by the dense model's Block Influence, not by scored sets"
    order: ClassVar[int] = 7  # position in report tables
    planned: ClassVar[Planned] = "fixed"  # no loss search: the dense pass and the chosen set
    metric: str = "cosine"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.metric not in METRICS:
            raise ValueError(f"bi: metric must be one of {METRICS}, got {self.metric!r}")

    def evaluation_bounds(self, n_layers: int, budget: int) -> Bounds:
        """The dense pass's hidden states rank the blocks; the chosen set is scored."""
        return Bounds(2, 2, {0: 1, budget: 1})

    def expected_evaluations(self, n_layers: int, budget: int, n_protected: int) -> int:
        return 1

    def run(self, ctx: SearchContext) -> frozenset[int]:
        influence = ctx.block_influence
        if influence is None:
            raise ValueError("bi: the score callable offers no block_influence(metric); the scoring engine "
                             "(depthprune.scoring.scorer.Scorer) does — a plain loss callable cannot rank blocks structurally")
        values = [float(v) for v in influence(self.metric)]
        if len(values) != ctx.n_layers:
            raise ValueError(f"bi: score.block_influence returned {len(values)} values for {ctx.n_layers} layers")
        # unrounded, so that a replay ranks exactly these values (depthprune.verify.replay); None for non-finite
        ctx.info["block_influence"] = [v if math.isfinite(v) else None for v in values]
        key = {i: (values[i] if math.isfinite(values[i]) else math.inf, i) for i in ctx.candidates}
        return frozenset(sorted(ctx.candidates, key=key.__getitem__)[: ctx.budget])

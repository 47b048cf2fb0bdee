"""A rival answer: what a cell's searcher would have removed had rounding turned one decision inside a band.

For each archived cell of a grid that is inside a band (:mod:`depthprune.verify.firmness`), the decision
*turned* is its first decisive one inside the band (the earliest: the prior's cut, then by evaluation). The
answer had rounding turned that decision, and no other:

* its **final** decision: the rival set, with its recorded loss;
* **oneshot's prior cut**: the cut's two singles swapped;
* anything else (a step, or the cut of a searcher that starts from the prior): the searcher is **followed**.
  It runs again with the cell's parameters, seed and protected layers, on a score that answers every set the
  cell recorded with its recorded loss, except that the turned decision's two sides swap losses (in the prior
  too, for a cut); a set the cell never scored is computed here with the model. Where the run asks only for
  recorded sets it is the same path in the reference's own numbers; where it leaves them, the new sets are
  this machine's.

The grid's tool (:mod:`depthprune.grid.measure_rivals`) runs them with the model and evaluates each rival set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from depthprune.results.schema import Result
from depthprune.search import get_searcher
from depthprune.verify.firmness import BANDS, INSIDE, cell_firmness, decision_key, turned
from depthprune.verify.replay import Decision, RecordedReads, recorded_loss, recorded_trace, replay


class TurnedScore(RecordedReads):
    """``score`` for a followed search: recorded losses (the turned decision's two sides swapped), the
    model for the rest (``compute``), and what the cell's searcher read besides (energy, influence)."""

    def __init__(self, recorded: Mapping[frozenset[int], float], swap: tuple[frozenset[int], frozenset[int]],
                 compute: Callable[[frozenset[int]], float], extras: Mapping[str, Any]) -> None:
        super().__init__(extras)
        self.losses = dict(recorded)
        a, b = swap
        if a in self.losses and b in self.losses:
            self.losses[a], self.losses[b] = self.losses[b], self.losses[a]
        self.compute = compute
        self.computed: list[frozenset[int]] = []

    def __call__(self, s: Iterable[int]) -> float:
        s = frozenset(s)
        if s not in self.losses:
            self.losses[s] = self.compute(s)
            self.computed.append(s)
        return self.losses[s]

    def many(self, sets: Iterable[Iterable[int]]) -> list[float]:
        return [self(s) for s in sets]


def follow(result: Result, decision: Decision, compute: Callable[[frozenset[int]], float]
           ) -> tuple[list[int], float, int]:
    """The cell's searcher run again with ``decision`` turned (module docstring): (removed, loss, sets
    computed here)."""
    recorded: dict[frozenset[int], float] = dict(recorded_trace(result))
    prior = [recorded_loss(v) for v in result.get("prior") or []]
    for i, v in enumerate(prior):
        recorded.setdefault(frozenset([i]), v)
    swap = (frozenset(decision.chosen), frozenset(decision.rival))
    if decision.kind == "prior":
        (i,), (j,) = decision.chosen, decision.rival
        prior[i], prior[j] = prior[j], prior[i]
    info = result.get("search_info") or {}
    extras: dict[str, Any] = {}
    if "energy" in info:
        extras["energy"] = (info["energy"]["h"], info["energy"]["J"])
    if "block_influence" in info:
        extras["block_influence"] = info["block_influence"]
    score = TurnedScore(recorded, swap, compute, extras)
    settings = result.get("settings") or {}
    seed = int(result.identity.search_seed)
    searcher = get_searcher(str(result.identity.search), **dict(result.get("search_params") or {}))
    torch.manual_seed(seed)  # as recipe.Calibration.search
    found = searcher.search(n_layers=int(result["n_layers"]), budget=len(result["removed"]), score=score,
                            seed=seed, protected=frozenset(settings.get("protected") or ()),
                            prior=prior if settings.get("use_prior", True) and result.get("prior") is not None else None)
    return sorted(found.removed), float(found.loss), len(score.computed)


def wanted(results: Sequence[Result], table: Mapping[str, Any]
           ) -> list[tuple[Result, Decision, list[str]]]:
    """(result, turned decision, bands) for every cell inside a band, one entry per distinct decision."""
    out: dict[tuple[str, str], tuple[Result, Decision, list[str]]] = {}
    for r in results:
        rep = replay(r)
        for band in BANDS:
            c = cell_firmness(r, rep.decisions, rep.status, band, table)
            d = turned(c) if c.status == INSIDE else None
            if d is not None:
                out.setdefault((str(r["cell"]), decision_key(d)), (r, d, []))[2].append(band)
    return list(out.values())

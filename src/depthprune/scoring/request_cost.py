"""What a sequence of scorer requests costs as if it had run alone, on a private scorer.

A search asks its scorer for removal sets, the gate-gradient energy (:data:`ENERGY`) or the
block influence (:data:`BLOCK_INFLUENCE`); the scorer logs every request in order. Replaying that
log through the same memo and prefix-cache policy (:class:`~depthprune.scoring.state_cache.StateCache`)
counts the layer-forwards a private scorer would run, independent of what a shared memo or cache
held. Its own module because the planner (:mod:`depthprune.plan.simulation`) counts with it
without a model, and every result's ``cost`` is counted with it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from depthprune.scoring.gates import energy_passes
from depthprune.scoring.state_cache import StateCache, boundary_key

Request = frozenset[int] | str  # a removal set, ENERGY or BLOCK_INFLUENCE
ENERGY = "energy"
BLOCK_INFLUENCE = "block_influence"


@dataclass(frozen=True)
class ReplayedCost:
    """What a sequence of requests costs on a private scorer of its own."""

    evaluations: int  # distinct removal sets requested (the dense set only if the searcher asked for it)
    layer_forwards: int
    layer_backwards: int


def replay_cost(requests: Iterable[Request], losses: dict[frozenset[int], float], n_layers: int,
                keep_best: int = 4, final_norm: bool = True, prefix_cache: bool = True) -> ReplayedCost:
    """Count ``requests`` as a fresh, private :class:`~depthprune.scoring.scorer.Scorer` would run them.

    The replay applies the scorer's own memo and prefix-cache policy (the same
    :class:`~depthprune.scoring.state_cache.StateCache`, holding no tensors) to the request sequence, so the count
    depends only on that sequence and the losses (which rank the kept states), never on
    what a shared memo or cache happened to hold, nor on this machine's memory: the byte
    budget is taken as never binding. The dense pass that every scorer starts with is
    included. ``prefix_cache=False`` counts every set from the embeddings, as a scorer
    whose start-up self-check turned the cache off does.
    """
    cache = StateCache(max_bytes=1 << 62, keep_best=keep_best)
    seen: set[frozenset[int]] = set()
    requested = {frozenset(r) for r in requests if not isinstance(r, str)}
    forwards = backwards = 0
    energy_done = influence_done = False
    for request in [frozenset(), *requests]:
        if request == ENERGY:
            if not energy_done:
                f, b = energy_passes(n_layers)
                forwards, backwards, energy_done = forwards + f, backwards + b, True
            continue
        if request == BLOCK_INFLUENCE:
            if not influence_done:
                forwards, influence_done = forwards + n_layers, True
            continue
        if isinstance(request, str):
            raise ValueError(f"unknown request {request!r}: a removal set, {ENERGY!r} or {BLOCK_INFLUENCE!r}")
        s = frozenset(request)
        if s in seen:
            continue
        seen.add(s)
        b, entry = cache.deepest(s, n_layers) if prefix_cache else (0, None)
        kept = [k for k in range(b, n_layers) if k not in s]
        if entry is not None and not kept and not final_norm:
            kept = [k for k in range(n_layers) if k not in s]
        forwards += len(kept)
        cache.offer(s, losses.get(s, math.nan), {boundary_key(k + 1, s): [] for k in kept})
    return ReplayedCost(len(requested), forwards, backwards)

"""Evaluations and layer-forwards from a cell's settings alone: the searcher's own bounds, and
the layer-forwards at the most evaluations with no prefix sharing."""

from __future__ import annotations

from typing import Any

from depthprune.search import SEARCHERS, get_searcher
from depthprune.search.base import Bounds, Searcher


def evaluation_bounds(searcher: str, params: dict[str, Any], n_layers: int, budget: int) -> Bounds:
    """Fewest and most distinct sets a grid cell's cost counts: the searcher's own rule
    (:meth:`depthprune.search.base.Searcher.evaluation_bounds`), with the budget checked."""
    s = get_searcher(searcher, **params)
    if not 0 < budget < n_layers:
        raise ValueError(f"budget {budget} is out of range for {n_layers} layers; allowed 1..{n_layers - 1}")
    try:
        return s.evaluation_bounds(n_layers, budget)
    except NotImplementedError:
        raise ValueError(f"searcher {searcher!r} has no planning rule (Searcher.evaluation_bounds); "
                         f"those with one: {', '.join(n for n in SEARCHERS.names() if _has_rule(n))}") from None


def _has_rule(name: str) -> bool:
    return SEARCHERS[name].evaluation_bounds is not Searcher.evaluation_bounds


def forwards_bound(n_layers: int, bounds: Bounds) -> int:
    """Layer-forwards with no prefix sharing at the most evaluations (needs no losses): the dense
    pass, every set from the embeddings, cbo's gate-gradient passes."""
    from depthprune.scoring.gates import energy_passes

    total = n_layers + sum(count * (n_layers - size) for size, count in bounds.sizes.items() if size > 0)
    return total + (energy_passes(n_layers)[0] if bounds.energy else 0)

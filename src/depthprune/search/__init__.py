"""Search algorithms over removal sets, by name.

    from depthprune.search import get_searcher, SEARCHERS
    result = get_searcher("greedy").search(n_layers=16, budget=3, score=fn, seed=0)

Each searcher is one file in this package whose class is decorated with ``@register``
(from :mod:`depthprune.search.base`); every module here is imported on first use of the
package, so a new file is found without editing this one. A name registered twice is an
error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from depthprune.search.base import (
    SEARCHERS,
    EvaluationBudgetExhausted,
    ScoreFn,
    SearchContext,
    Searcher,
    SearchResult,
    register,
)


def get_searcher(name: str, **params: Any) -> Searcher:
    """Instantiate a registered searcher; unknown names or parameters raise ValueError."""
    try:
        cls = SEARCHERS[name]
    except KeyError:
        raise ValueError(f"unknown searcher {name!r}; allowed: {SEARCHERS.allowed()}") from None
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(
            f"searcher {name!r} has no parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    return cls(**params)


SEARCHERS.discover(__name__)

__all__ = [
    "SEARCHERS",
    "EvaluationBudgetExhausted",
    "ScoreFn",
    "SearchContext",
    "SearchResult",
    "Searcher",
    "get_searcher",
    "register",
]

"""Search algorithms over removal sets, by name.

    from depthprune.search import get_searcher, SEARCHERS
    result = get_searcher("greedy").search(n_layers=16, budget=3, score=fn, seed=0)

Each searcher is one file in this package; ``SEARCHERS`` maps names to classes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from depthprune.search.base import (
    EvaluationBudgetExhausted,
    ScoreFn,
    SearchContext,
    Searcher,
    SearchResult,
)

SEARCHERS: dict[str, type[Searcher]] = {}


def register(cls: type[Searcher]) -> type[Searcher]:
    """Class decorator: make a searcher available by its ``name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    SEARCHERS[cls.name] = cls
    return cls


def get_searcher(name: str, **params: Any) -> Searcher:
    """Instantiate a registered searcher; unknown names or parameters raise ValueError."""
    try:
        cls = SEARCHERS[name]
    except KeyError:
        raise ValueError(f"unknown searcher {name!r}; allowed: {', '.join(sorted(SEARCHERS))}") from None
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(
            f"searcher {name!r} has no parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )
    return cls(**params)


# Import the algorithm modules so that they register themselves.
from depthprune.search import exhaustive, greedy, oneshot  # noqa: E402,F401

for _optional in ("beam", "ga", "bo", "cbo", "fbs"):
    try:
        __import__(f"depthprune.search.{_optional}")
    except ModuleNotFoundError as _err:  # pragma: no cover - only while a module is absent
        if _err.name != f"depthprune.search.{_optional}":
            raise

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

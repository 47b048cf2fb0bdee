"""Range checks of searcher and objective parameters, shared so that every one fails alike.

A parameter out of range is bad input: it must fail when the searcher or objective is built
(``get_searcher`` / ``make_objective``), which the CLI does before it loads a model, so
``depthprune prune --param max_evaluations=-5`` exits 2 naming the parameter and what is
allowed instead of failing after the load.
"""

from __future__ import annotations

import re
from typing import Any


def check_ints(owner: str, obj: Any, lows: dict[str, int], optional: tuple[str, ...] = ()) -> None:
    """Each named field of ``obj`` an integer >= its low bound (``optional`` ones may be None)."""
    for name, low in lows.items():
        value = getattr(obj, name)
        if value is None and name in optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            allowed = f"an integer >= {low}" + (" or None" if name in optional else "")
            raise ValueError(f"{owner}: {name} must be {allowed}, got {value!r}")


def check_choice(owner: str, name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{owner}: {name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def check_shard(owner: str, value: Any) -> None:
    """A calibration ``shard`` (``""`` or ``"i/n"``, :func:`parse_shard`), failing as the others do."""
    try:
        parse_shard(value)
    except ValueError as e:
        raise ValueError(f"{owner}: {e}") from None


def parse_shard(shard: str) -> tuple[int, int] | None:
    """``"i/n"`` -> (i, n) with 0 <= i < n; ``""`` -> None (the whole pool). Raises on anything else."""
    if shard == "":
        return None
    m = re.fullmatch(r"(\d+)/(\d+)", shard) if isinstance(shard, str) else None
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"shard must be '' (the whole pool) or 'i/n' with 0 <= i < n, got {shard!r}")
    return int(m.group(1)), int(m.group(2))

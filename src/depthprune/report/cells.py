"""How REPORT.md writes a number, a percentage and a removed set (one place for every section)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def fmt(value: Any, digits: int = 3) -> str:
    """A float to ``digits`` places; None, nan and inf as "–"; anything else as str()."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def layers(removed: Sequence[int]) -> str:
    return ",".join(map(str, sorted(removed)))

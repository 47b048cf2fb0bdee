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


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], keys: int = 1, width: int | None = None) -> str:
    """A GitHub-markdown table at most ``width`` (REPORT's 160) characters wide: one that would be wider
    is split by columns into as few tables as fit, each repeating the first ``keys`` columns (what
    identifies a row), the other columns shared out evenly in order. A table whose key columns and any
    single other column do not fit stays whole."""
    from tabulate import tabulate

    from depthprune.report.wrap import WIDTH

    width = WIDTH if width is None else width

    def render(cols: Sequence[int]) -> str:
        return tabulate([[row[c] for c in cols] for row in rows], headers=[headers[c] for c in cols],
                        tablefmt="github", disable_numparse=True)

    def fits(text: str) -> bool:
        return max(map(len, text.splitlines())) <= width

    whole = render(range(len(headers)))
    rest = list(range(keys, len(headers)))
    if fits(whole) or len(rest) < 2:
        return whole
    for parts in range(2, len(rest) + 1):
        size = math.ceil(len(rest) / parts)
        chunks = [rest[i:i + size] for i in range(0, len(rest), size)]
        tables = [render([*range(keys), *chunk]) for chunk in chunks]
        if all(fits(t) for t in tables):
            return "\n\n".join(tables)
    return whole

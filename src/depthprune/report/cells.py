"""How REPORT.md writes a number, a percentage and a removed set (one place for every section)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from depthprune.common.text_tables import fixed, markdown_table


def fmt(value: Any, digits: int = 3) -> str:
    """A number as REPORT's tables write it (:func:`depthprune.common.text_tables.fixed`)."""
    return fixed(value, digits)


def layers(removed: Sequence[int]) -> str:
    return ",".join(map(str, sorted(removed)))


#: an interval as REPORT writes one: ``[60.5, 72.0]``, ``[-0.48, +0.81]``, ``[0.0107, 0.0121]``, ``[–, –]``
_NUM = r"(?:[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|∞)|–)"
_INTERVAL = re.compile(rf"\[({_NUM}), ({_NUM})\]")
NBSP = "\u00a0"


def keep_together(cell: Any, short: int = 20) -> Any:
    """A cell's intervals with no-break spaces: a browser squeezing a table (GitHub's CSS fits it to
    the page) never breaks ``[60.5,`` from ``72.0]``, nor, in a cell of at most ``short`` characters
    (an accuracy ``66.4 [60.5, 72.0]``), the value from its interval; a longer cell may put its
    interval on the line below the value."""
    if not isinstance(cell, str) or not _INTERVAL.search(cell):
        return cell
    cell = _INTERVAL.sub(rf"[\1,{NBSP}\2]", cell)
    return cell.replace(" ", NBSP) if len(cell) <= short else cell


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str], keys: int = 1, width: int | None = None) -> str:
    """A GitHub-markdown table at most ``width`` (REPORT's 160) characters wide: one that would be wider
    is split by columns into as few tables as fit, each repeating the first ``keys`` columns (what
    identifies a row), the other columns shared out evenly in order. A table whose key columns and any
    single other column do not fit stays whole. Cells that are a value with its interval keep
    together (:func:`depthprune.report.cells.keep_together`)."""

    from depthprune.report.wrap import WIDTH

    width = WIDTH if width is None else width
    rows = [[keep_together(c) for c in row] for row in rows]

    def render(cols: Sequence[int]) -> str:
        return markdown_table([[row[c] for c in cols] for row in rows], [headers[c] for c in cols])

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

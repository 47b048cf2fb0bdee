"""How the suite writes a table and a number: one place, so REPORT, reports/ and every CLI print agree.

Tables are GitHub markdown (``tabulate``'s ``github`` format), so REPORT.md renders on GitHub and a
CLI table pastes into an issue. Cells go in as the caller formatted them (``numparse`` off) unless a
caller asks tabulate to align and shorten numbers itself.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["fixed", "markdown_table", "significant"]


def markdown_table(rows: Iterable[Sequence[Any]] | Iterable[Mapping[str, Any]], headers: Sequence[str] | str,
                   numparse: bool = False) -> str:
    """A GitHub-markdown table of ``rows`` under ``headers`` (``"keys"``: the rows' own keys)."""
    from tabulate import tabulate

    return str(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=not numparse))


def fixed(value: Any, digits: int = 3) -> str:
    """A float to ``digits`` decimal places; None, nan and ±inf as "–"; anything else as ``str()``."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def significant(value: Any) -> str:
    """A number to 3 significant digits; – for none or nan, ∞ for infinity, lists joined by commas."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return "∞" if math.isinf(value) else f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)

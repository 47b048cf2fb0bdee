"""Markdown prose wrapped for a reader: REPORT.md's paragraphs and list items at most ``width`` wide.

The sections build each paragraph as one long line; rendered, that is fine, but the file itself
is read too (in a terminal, a diff, a review), where a 600-character line is not. Only prose is
wrapped: fenced code, table rows, headings, images and HTML comments pass as they are. A
continuation line never starts with a token that would turn it into markup (a list marker, a
heading, a table or quote bar), so the rendered text is the same as the unwrapped one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

WIDTH = 160
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+")
# a word that, first on a line, would start a list, heading, rule, quote, table, fence or HTML block
_RISKY = re.compile(r"^(?:[-*+]|#{1,6}|\d{1,9}[.)]|[-=]+|[*_]{3,})$|^(?:[|>]|`{3}|~{3}|<[A-Za-z!/?])")


def _passes(line: str) -> bool:
    """Lines that are not prose: kept whole."""
    stripped = line.lstrip()
    return not stripped or stripped.startswith(("|", "#", "![", "<")) or line.startswith("    ")


def _wrap(line: str, width: int) -> list[str]:
    """One paragraph or list item line as several; continuation lines indented under the item's text."""
    m = _ITEM.match(line)
    lead = m.end() if m else len(line) - len(line.lstrip(" "))
    head, indent = line[:lead], " " * lead
    rows: list[list[str]] = [[]]
    for word in (w for w in line[lead:].split(" ") if w):  # ASCII spaces only: a no-break space binds
        row = rows[-1]
        if row and lead + len(" ".join(row)) + 1 + len(word) > width:
            nxt = [word]
            while _RISKY.match(nxt[0]) and len(row) > 1:  # take the word before along (or overflow)
                nxt.insert(0, row.pop())
            rows.append(nxt)
        else:
            row.append(word)
    return [head + " ".join(rows[0])] + [indent + " ".join(r) for r in rows[1:]]


def wrap_markdown(lines: Iterable[str], width: int = WIDTH) -> list[str]:
    """Every prose line of ``lines`` wrapped to ``width`` (a word longer than that stays whole)."""
    out: list[str] = []
    fence: str | None = None
    for text in lines:
        for line in text.split("\n"):
            stripped = line.lstrip()
            if fence is not None:
                out.append(line)
                if stripped.startswith(fence):
                    fence = None
                continue
            if stripped.startswith(("```", "~~~")):
                fence = stripped[:3]
                out.append(line)
                continue
            out += [line] if len(line) <= width or _passes(line) else _wrap(line, width)
    return out

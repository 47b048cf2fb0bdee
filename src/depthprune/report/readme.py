"""README.md's verdict block: the matrix between two marker comments, rewritten by ``depthprune report``.

README states today's verdicts, and a hand-copied table would go stale with the first rerun; so
the block is written from the same verdicts as REPORT.md, and a test checks that the committed
block is what the committed archives give. Only the lines between the markers are touched.

Which README: ``depthprune report --readme FILE`` names one (it must hold the markers); without
it, the README.md beside ``--out`` is rewritten if it holds the markers, and nothing otherwise
(``--no-readme``: never). So ``depthprune report --out REPORT.md`` in a checkout keeps both in step,
and a report written anywhere else leaves every README alone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from depthprune.report.claims import Verdict
from depthprune.report.verdicts import matrix
from depthprune.report.wrap import wrap_markdown

START = "<!-- verdicts:start (written by `depthprune report`; do not edit by hand) -->"
END = "<!-- verdicts:end -->"


def _span(lines: Sequence[str]) -> tuple[int, int] | None:
    """Indices of the start and end marker lines, or None."""
    starts = [i for i, line in enumerate(lines) if line.startswith("<!-- verdicts:start")]
    ends = [i for i, line in enumerate(lines) if line.startswith(END)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        return None
    return starts[0], ends[0]


def has_block(path: str | Path) -> bool:
    path = Path(path)
    return path.is_file() and _span(path.read_text(encoding="utf-8").splitlines()) is not None


def beside(out: str | Path) -> Path | None:
    """The README.md next to a report file, if it holds the markers (the default rule)."""
    readme = Path(out).parent / "README.md"
    return readme if has_block(readme) else None


def block(verdicts: Sequence[Verdict], not_run: Sequence[str], readme: str | Path, report: str | Path,
          in_part: Sequence[str] = ()) -> list[str]:
    """The marker lines and the matrix between them, linking to ``report`` relative to ``readme``;
    ``in_part``: grids run in part (REPORT says which cells)."""
    link = Path(os.path.relpath(Path(report).resolve(), Path(readme).resolve().parent)).as_posix()
    lines = [START, *matrix(verdicts, not_run), "",
             *([f"Run in part: {', '.join(f'`{g}`' for g in in_part)}; its column rests on the cells run.", ""]
               if in_part else []),
             f"Each claim's quote, statistic, interval and threshold, and how each verdict moves with its threshold: "
             f"[{link}]({link}).", END]
    return wrap_markdown(lines)  # one line per table row, prose wrapped as REPORT.md's


def current(path: str | Path) -> list[str]:
    """The block as it stands in ``path``, markers included."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    span = _span(lines)
    if span is None:
        raise ValueError(f"{path}: no verdict block (a line starting '<!-- verdicts:start' and one '{END}')")
    return lines[span[0]:span[1] + 1]


def rewrite(path: str | Path, new: Sequence[str]) -> bool:
    """Replace the block in ``path`` by ``new``; True when the file changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    span = _span(lines)
    if span is None:
        raise ValueError(f"{path}: no verdict block (a line starting '<!-- verdicts:start' and one '{END}')")
    out = "\n".join([*lines[:span[0]], *new, *lines[span[1] + 1:]]) + ("\n" if text.endswith("\n") else "")
    if out == text:
        return False
    path.write_text(out, encoding="utf-8")
    return True

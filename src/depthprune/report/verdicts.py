"""The verdict matrix: the paper's claims × grids, the first thing REPORT.md and README.md show.

A reader's first question is which claims held where; the statistics, quotes and sensitivity
follow in REPORT.md. Every grid with results is a column, and so is every main grid the case
files declare that has none (NOT RUN), so that a matrix measured on small models cannot pass
for the paper's grid. A cell says the outcome, what it rests on (n: conditions · distinct
pruned models) and, where the claim's statistic has a noise interval, its minimum detectable
effect: a NOT MEASURED with an MDE says how large an effect the evaluation could have seen.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from depthprune.common.text_tables import markdown_table
from depthprune.report.claims import CLAIMS, Verdict

NOT_RUN = "NOT RUN"
#: the matrix cell of a grid without results: a no-break space, so that a browser squeezing the
#: table does not break it into "NOT" over "RUN" in every row (grep it as ``NOT.RUN``)
NOT_RUN_CELL = NOT_RUN.replace(" ", "\u00a0")

WIDTH = 160  # the matrix drops its gist column rather than grow wider than this


def columns(verdicts: Sequence[Verdict], not_run: Sequence[str]) -> list[str]:
    """Grids with verdicts (sorted), then the declared grids without results."""
    have = sorted({v.grid for v in verdicts})
    return have + [g for g in not_run if g not in have]


def _mde(value: float | None) -> str:
    return "–" if value is None else f"{value:.2g}"


def mde_names(vs: Sequence[Verdict]) -> list[str]:
    """The measures of one claim that have an MDE on some grid, in the claim's order."""
    names: list[str] = []
    for v in vs:
        names += [m.name for m in v.measures if m.mde is not None and m.name not in names]
    return names


#: marks a verdict that rounding can flip (REPORT's "How firmly each set is decided")
FLIP_MARK = "‡"


def cell(v: Verdict | None, names: Sequence[str], flips: bool = False) -> str:
    """``**HELD** (6 · 32)``, then ``; MDE a, b`` in the order of ``names`` where the claim has MDEs;
    :data:`FLIP_MARK` after the outcome where ``flips``."""
    if v is None:
        return NOT_RUN_CELL
    mde = {m.name: m.mde for m in v.measures}
    rests = f"{v.n_conditions} · {v.n_distinct}" + (f"; MDE {', '.join(_mde(mde.get(n)) for n in names)}"
                                                     if names else "")
    return f"**{v.outcome}**{FLIP_MARK if flips else ''} ({rests})"


#: a healing claim's cell where the grid has results but no healed ones
NOT_HEALED = "not healed"


def matrix(verdicts: Sequence[Verdict], not_run: Sequence[str],
           flippable: Collection[tuple[str, str]] = ()) -> list[str]:
    """The claims × grids table and its legend; the legend names the statistics whose MDE a cell
    gives (in a column of their own they made every row wrap in a browser). ``flippable``: the
    (claim id, grid) of verdicts that rounding can flip, marked and named in the legend."""
    grids = columns(verdicts, not_run)
    by = {(v.claim.id, v.grid): v for v in verdicts}
    rows, named = [], []
    for claim_id in CLAIMS:
        healing = CLAIMS[claim_id].reads_healed
        if healing and not any(v.claim.id == claim_id for v in verdicts):
            continue  # a healing claim has a row once some grid is healed (tox -e heal-tiny)
        names = mde_names([v for v in verdicts if v.claim.id == claim_id])
        if names:
            named.append(f"{claim_id} {', '.join(names)}")
        rows.append([claim_id, CLAIMS[claim_id].gist or CLAIMS[claim_id].section,
                     *(NOT_HEALED if healing and (claim_id, g) not in by and g not in not_run
                       else cell(by.get((claim_id, g)), names, (claim_id, g) in flippable) for g in grids)])
    headers = ["claim", "the paper says", *(f"`{g}`" for g in grids)]
    table = markdown_table(rows, headers)
    if max(len(line) for line in table.splitlines()) > WIDTH:
        table = markdown_table([[r[0], *r[2:]] for r in rows], [headers[0], *headers[2:]])
    missing = [g for g in grids if not any(v.grid == g for v in verdicts)]
    legend = ("(n = conditions · distinct pruned models the verdict rests on; MDE = the smallest effect the "
              "evaluation detects at the claims' power, on its own scale, of each statistic the claim judges by"
              + (f" ({'; '.join(named)})" if named else ""))
    legend += f"; {NOT_RUN} = declared in `cases/`, no results yet: {', '.join(f'`{g}`' for g in missing)})" \
        if missing else ")"
    if flippable:
        legend += (f" {FLIP_MARK} = a verdict rounding can flip: it changes when the cells whose set rests on a "
                   "decision inside a rounding band take their rival set (How firmly each set is decided).")
    return [table, "", legend]


def findings(verdicts: Sequence[Verdict]) -> list[str]:
    """One line per claim: what it says and what each grid with results found, in the verdict's words."""
    lines = []
    for claim_id in CLAIMS:
        vs = [v for v in verdicts if v.claim.id == claim_id]
        if vs:
            found = "; ".join(f"`{v.grid}` {v.outcome}: {v.reason}" for v in vs)
            lines.append(f"- **{claim_id}** ({CLAIMS[claim_id].gist or CLAIMS[claim_id].section}). {found}.")
    return lines

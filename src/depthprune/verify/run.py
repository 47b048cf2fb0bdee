"""``depthprune verify``: select archived cells, replay them, and say per cell what held.

The cells come from a results directory or a folder of archives (:func:`depthprune.grid.results.iter_results`
reads both). Selection errors are the user's input and are raised as :class:`SelectionError`
before any cell is replayed: a grid the results do not hold, a cell id that is not there.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tabulate import tabulate
from tqdm.auto import tqdm

from depthprune.verify.replay import FAILED, PARTIAL, REPLAYED, Replay, replay


class SelectionError(ValueError):
    """The results or the selection cannot be verified as asked (a usage error: exit 2)."""


def select_cells(results: Sequence[str | Path], grids: Iterable[str] | None = None,
                 cells: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The cell results under ``results`` of ``grids`` (all when None), only ``cells`` where given."""
    from depthprune.grid.results import iter_results

    found = list(iter_results(results))
    where = ", ".join(str(r) for r in results)
    if not found:
        raise SelectionError(f"--results {where}: no cell results (result files or <grid>.jsonl.xz archives)")
    have = sorted({r["grid"] for r in found})
    wanted_grids = list(grids or [])
    unknown = [g for g in wanted_grids if g not in have]
    if unknown:
        raise SelectionError(f"--grid {unknown[0]}: --results {where} holds no cell of that grid; "
                             f"its grids: {', '.join(have)}")
    if wanted_grids:
        found = [r for r in found if r["grid"] in wanted_grids]
    wanted_cells = list(cells or [])
    if wanted_cells:
        ids = {r["cell"] for r in found}
        for cell in wanted_cells:
            if cell not in ids:
                close = difflib.get_close_matches(cell, sorted(ids), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise SelectionError(f"--cell {cell}: no such cell in --results {where}"
                                     f"{' (grid ' + ', '.join(wanted_grids) + ')' if wanted_grids else ''}{hint}")
        found = [r for r in found if r["cell"] in wanted_cells]
    return found


def replay_cells(results: Sequence[dict[str, Any]], progress: bool = True) -> list[Replay]:
    """:func:`depthprune.verify.replay.replay` over ``results``, with a progress bar."""
    return [replay(r) for r in tqdm(results, desc="replay", unit="cell", disable=not progress, leave=False)]


def summary(replays: Sequence[Replay]) -> str:
    """Counts per grid and searcher, as a table."""
    counts: Counter[tuple[str, str, str]] = Counter((r.grid, r.searcher, r.status) for r in replays)
    keys = sorted({(g, s) for g, s, _ in counts})
    rows = [[g, s, counts[g, s, REPLAYED], counts[g, s, PARTIAL], counts[g, s, FAILED]] for g, s in keys]
    rows.append(["all", "", *(sum(1 for r in replays if r.status == st) for st in (REPLAYED, PARTIAL, FAILED))])
    return tabulate(rows, headers=["grid", "searcher", "replayed", "partly replayed", "failed"], tablefmt="github")


def cell_lines(replays: Sequence[Replay]) -> list[str]:
    """One line per cell that did not replay whole: what failed, or which part was not replayed and why."""
    lines = []
    for r in replays:
        if r.status == FAILED:
            lines.append(f"FAILED  {r.grid}/{r.cell}: {r.disagreement}")
        elif r.status == PARTIAL:
            lines.append(f"PARTLY REPLAYED  {r.grid}/{r.cell} ({r.replayed_evaluations} of {r.recorded_evaluations} "
                         f"evaluations): not replayed: {r.not_replayed}")
    return lines


def report_json(replays: Sequence[Replay], results: Sequence[str | Path], seconds: float) -> dict[str, Any]:
    """What ``--json`` writes."""
    return {"mode": "replay-only", "results": [str(r) for r in results], "seconds": round(seconds, 3),
            "counts": {st: sum(1 for r in replays if r.status == st) for st in (REPLAYED, PARTIAL, FAILED)},
            "cells": [r.to_dict() for r in replays]}

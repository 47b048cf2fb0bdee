"""Longest-first scheduling of a grid's cell groups on xdist workers.

``--dist loadgroup`` keeps a group (a model and objective: one calibration, one memo) on one
worker and hands the groups out in collection order as workers free up. In case-file order a
heavy group collected last leaves the other worker idle at the end (the tiny grid's
llama3.1/margin group is twice the llama3/ppl one). Collecting the groups longest first makes
that greedy hand-out the LPT rule, whose makespan is at most 4/3 of the optimum.

How long a cell takes comes from a durations file the code writes from finished results
(``depthprune durations``), committed per grid in ``cases/durations/`` and saying which run it
came from -- pytest-split's recorded-durations idea, applied to groups. A cell it does not list
counts as the median of its searcher's recorded cells, else of all recorded cells, else 1, so
an empty file keeps case-file order. Only the order changes: never which cells run or how.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from depthprune.common import layout
from depthprune.common.jsonio import JSONFileError, read_json, write_json
from depthprune.grid.cases import Cell

T = TypeVar("T")



def cell_seconds(result: Mapping[str, Any]) -> float:
    """Wall seconds a finished cell took in its grid run: its search and prior as they ran there
    (without sets another search of the condition computed) plus its evaluation."""
    c = result["cost"]
    return max(0.0, c.get("seconds", 0.0) - c.get("shared_seconds", 0.0) - c.get("dense_seconds", 0.0)
               + c.get("eval_seconds", 0.0))


def durations_from_results(results: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """cell id -> seconds, from result dicts (the last one given wins)."""
    return {r["cell"]: round(cell_seconds(r), 1) for r in results}


def write_durations(path: str | Path, durations: Mapping[str, float], source: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"written_by": "depthprune durations", "source": source,
           "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "note": "seconds per cell as a grid run took them; used only to order cell groups longest first",
           "seconds": dict(sorted(durations.items()))}
    write_json(path, doc, indent=1, sort_keys=False)
    return path


def load_durations(grid: str, cases_dir: str | Path = layout.CASES) -> dict[str, float]:
    """The recorded durations of ``grid`` under ``cases_dir`` ({} when none are recorded)."""
    path = layout.durations_file(cases_dir, grid)
    if not path.is_file():
        return {}
    try:
        seconds = read_json(path)["seconds"]
    except (JSONFileError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a durations file (needs a 'seconds' table of cell id -> seconds): {exc}") from exc
    return {str(k): float(v) for k, v in seconds.items()}


def estimate(cells: Sequence[Cell], recorded: Mapping[str, float]) -> dict[str, float]:
    """Seconds per cell id: recorded, else its searcher's median, else the overall median, else 1."""
    by_searcher: dict[str, list[float]] = {}
    for c in cells:
        if c.id in recorded:
            by_searcher.setdefault(c.search, []).append(recorded[c.id])
    overall = statistics.median(recorded.values()) if recorded else 1.0
    return {c.id: recorded.get(c.id, statistics.median(by_searcher[c.search]) if c.search in by_searcher else overall)
            for c in cells}


def longest_first(items: Sequence[T], group_of: Mapping[int, str], seconds_of: Mapping[int, float]) -> list[T]:
    """``items`` with each group's items kept together in their order, groups ordered by their
    summed seconds, longest first (ties: first collected first). Items without a group stay
    in place ahead of the grouped ones' first position."""
    groups: dict[str, list[int]] = {}
    for i in range(len(items)):
        if i in group_of:
            groups.setdefault(group_of[i], []).append(i)
    if not groups:
        return list(items)
    order = sorted(groups, key=lambda g: (-sum(seconds_of.get(i, 0.0) for i in groups[g]), groups[g][0]))
    first = min(i for idx in groups.values() for i in idx)
    grouped = [items[i] for g in order for i in groups[g]]
    before = [items[i] for i in range(first) if i not in group_of]
    after = [items[i] for i in range(first, len(items)) if i not in group_of]
    return before + grouped + after

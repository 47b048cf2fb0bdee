"""Where a grid run's time went, and which of its work repeated another cell's, from its results.

Per cell, from its ``cost``: the search as it ran in that process (its searcher's own sets, less
those another search of the condition had computed), and the evaluation of its removed set (none
when the evaluation cache held it). Once per condition (model and calibration): the dense
pass that builds the scorer and the single-removal prior; once per model and grid: the load and
the dense model's evaluation (``dense/<model>.json``). What a run's wall time times its workers
holds beyond these is *other*: process start, imports, pytest's collection, lm-eval's task
building, the reference comparison.

Repeats: a scored set is a repeat when another cell of its condition asked for it too; an
evaluation is a repeat when another cell of its model removed the same set. *Computed twice*
counts the repeats that were computed again rather than shared (a condition split across
processes, or a rerun): the waste a shared store removes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from depthprune.common.jsonio import read_json
from depthprune.results.schema import Result, calibration_of
from depthprune.scoring.gates import energy_passes


def _requested(result: Mapping[str, Any]) -> set[frozenset[int]]:
    sets = {frozenset(s) for s, _ in result.get("trace", [])}
    if result.get("search_info", {}).get("used_given_prior"):
        sets |= {frozenset([i]) for i in range(int(result["n_layers"]))}
    return sets


def search_here(cost: Mapping[str, Any]) -> float:
    """The search's seconds as it ran in its process: without the sets (and energy) other searches of
    the condition had computed, which ``search_seconds`` counts as if the searcher ran alone."""
    shared_search = cost.get("shared_seconds", 0.0) - cost.get("shared_prior_seconds", 0.0)
    return max(0.0, cost.get("search_seconds", 0.0) - shared_search)


def _evaluation_here(cost: Mapping[str, Any]) -> float:
    """The removed set's evaluation seconds in this run (none when the evaluation cache held it)."""
    return 0.0 if cost.get("eval_cached") else cost.get("eval_seconds", 0.0)


def per_searcher(results: Iterable[Result]) -> list[dict[str, Any]]:
    """One row per searcher: cells, seconds of search as it ran and as shared, of evaluation."""
    rows: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(int))  # counts stay int
    for r in results:
        c, row = r["cost"], rows[r.identity.search]
        row["cells"] += 1
        row["search s (here)"] += search_here(c)
        row["search s (shared)"] += c.get("search_seconds", 0.0) - search_here(c)
        row["evaluation s"] += _evaluation_here(c)
        row["evaluations cached"] += int(bool(c.get("eval_cached")))
        row["sets asked"] += len(_requested(r))
        row["sets shared"] += int(c.get("shared_sets", 0))
    return [{"searcher": name, **{k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}}
            for name, row in sorted(rows.items())]


def per_phase(results: list[Result], dense_files: list[Mapping[str, Any]], eval_cache: Path | None,
              wall_seconds: float | None = None, workers: int = 1) -> list[dict[str, Any]]:
    """Seconds per phase over the whole run (module docstring), and their share of wall × workers."""
    phases: defaultdict[str, float] = defaultdict(int)
    for r in results:
        phases["search, as it ran"] += search_here(r["cost"])
        phases["evaluation of removed sets"] += _evaluation_here(r["cost"])
    for d in dense_files:
        phases["model load"] += float(d.get("load_seconds", 0.0))
        for obj in d.get("objectives", {}).values():
            phases["dense pass (scorer)"] += float(obj.get("dense_seconds", 0.0))
            phases["prior (singles)"] += float(obj.get("prior_seconds_here", obj.get("prior_seconds", 0.0)))
        if "eval_seconds" in d:  # as it took where computed, counted once per model
            phases["dense evaluation"] += float(d["eval_seconds"])
    if eval_cache is not None and not any("eval_seconds" in d for d in dense_files):
        for path in sorted(Path(eval_cache).glob("*.json")):
            entry = read_json(path)
            if not entry.get("removed"):
                phases["dense evaluation"] += float(entry.get("seconds", 0.0))
    rows: list[dict[str, Any]] = [{"phase": k, "seconds": round(v, 1)} for k, v in phases.items()]
    if wall_seconds:
        total = wall_seconds * workers
        rows.append({"phase": "other (start-up, collection, lm-eval set-up, comparisons, idle)",
                     "seconds": round(total - sum(phases.values()), 1)})
        for row in rows:
            row["share"] = f"{100 * row['seconds'] / total:.1f}%"
    return rows


def repeats(results: list[Result]) -> list[dict[str, Any]]:
    """Per condition: sets asked by its cells, distinct sets, repeats, repeats computed again; and
    per model: evaluations, distinct removed sets, repeats, repeats computed again."""
    by_cond: dict[tuple, list[Result]] = defaultdict(list)
    for r in results:
        by_cond[calibration_of(r)].append(r)
    rows = []
    for cond, cells in sorted(by_cond.items()):
        asked = [_requested(r) for r in cells]
        distinct = set().union(*asked)
        # computed in its cell's process: asked, less the prior's singles (computed once per condition and
        # process) and less the sets the condition's memo gave it
        computed = sum(len({s for s in a if len(s) > 1}) - int(r["cost"].get("shared_sets", 0))
                       for a, r in zip(asked, cells))
        rows.append({"what": f"scored sets: {cond[0]} {cond[1]}", "cells": len(cells), "asked": sum(map(len, asked)),
                     "distinct": len(distinct), "repeats": sum(map(len, asked)) - len(distinct),
                     "computed twice": max(0, computed - len({s for s in distinct if len(s) > 1}))})
        energy = [r for r in cells if r["cost"].get("layer_backwards", 0) > 0]
        if energy:
            # a cell computed the energy itself when its own forwards hold the energy's passes
            # (more than the searcher's top_k sets can take)
            here = sum(int(r["cost"].get("layer_forwards_here", 0) >= energy_passes(int(r["n_layers"]))[0])
                       for r in energy)
            rows.append({"what": f"gate-gradient energy: {cond[0]} {cond[1]}", "cells": len(energy),
                         "asked": len(energy), "distinct": 1, "repeats": len(energy) - 1,
                         "computed twice": max(0, here - 1)})
    by_model: dict[str, list[Result]] = defaultdict(list)
    for r in results:
        by_model[r.identity.model].append(r)
    for model, cells in sorted(by_model.items()):
        sets = Counter(tuple(sorted(r["removed"])) for r in cells)
        fresh = Counter(tuple(sorted(r["removed"])) for r in cells if not r["cost"].get("eval_cached"))
        rows.append({"what": f"evaluations: {model}", "cells": len(cells), "asked": len(cells), "distinct": len(sets),
                     "repeats": len(cells) - len(sets), "computed twice": sum(n - 1 for n in fresh.values() if n > 1)})
    return rows


__all__ = ["per_phase", "per_searcher", "repeats", "search_here"]

"""``depthprune verify``: select archived cells, replay them, and say per cell what held.

The cells come from a results directory or a folder of archives (:func:`depthprune.results.store.iter_results`
reads both). Selection errors are the user's input and are raised as :class:`SelectionError`
before any cell is replayed: a grid the results do not hold, a cell id that is not there.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from depthprune.common.text_tables import markdown_table
from depthprune.results.schema import Result
from depthprune.verify.replay import FAILED, PARTIAL, REPLAYED, Replay, replay


class SelectionError(ValueError):
    """The results or the selection cannot be verified as asked (a usage error: exit 2)."""


def select_cells(results: Sequence[str | Path], grids: Iterable[str] | None = None,
                 cells: Iterable[str] | None = None) -> list[Result]:
    """The cell results under ``results`` of ``grids`` (all when None), only ``cells`` where given."""
    from depthprune.results.store import iter_results

    found = list(iter_results(results))
    where = ", ".join(str(r) for r in results)
    if not found:
        raise SelectionError(f"--results {where}: no cell results (result files or <grid>.jsonl.xz archives)")
    have = sorted({r.identity.grid for r in found if r.identity.grid is not None})
    wanted_grids = list(grids or [])
    unknown = [g for g in wanted_grids if g not in have]
    if unknown:
        raise SelectionError(f"--grid {unknown[0]}: --results {where} holds no cell of that grid; "
                             f"its grids: {', '.join(have)}")
    if wanted_grids:
        found = [r for r in found if r.identity.grid in wanted_grids]
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


def replay_cells(results: Sequence[Result], progress: bool = True) -> list[Replay]:
    """:func:`depthprune.verify.replay.replay` over ``results``, with a progress bar."""
    return [replay(r) for r in tqdm(results, desc="replay", unit="cell", disable=not progress, leave=False)]


def summary(replays: Sequence[Replay]) -> str:
    """Counts per grid and searcher, as a table."""
    counts: Counter[tuple[str, str, str]] = Counter((r.grid, r.searcher, r.status) for r in replays)
    keys = sorted({(g, s) for g, s, _ in counts})
    rows = [[g, s, counts[g, s, REPLAYED], counts[g, s, PARTIAL], counts[g, s, FAILED]] for g, s in keys]
    rows.append(["all", "", *(sum(1 for r in replays if r.status == st) for st in (REPLAYED, PARTIAL, FAILED))])
    return markdown_table(rows, ["grid", "searcher", "replayed", "partly replayed", "failed"], numparse=True)


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


def check_weights(results: Sequence[Result]) -> None:
    """Every model of ``results`` has weights on this machine, before anything is loaded."""
    from depthprune.model import WeightsUnavailable, locate, resolve

    for model in sorted({r.identity.model for r in results}):
        try:
            locate(resolve(model))
        except WeightsUnavailable as err:
            cells = sorted(r["cell"] for r in results if r.identity.model == model)
            raise SelectionError(f"{model} (cells {cells[0]}{' ...' if len(cells) > 1 else ''}): its weights are not "
                                 f"on this machine: {str(err).splitlines()[0]}") from None


def remeasure_summary(checks: Sequence[Any]) -> str:
    """Counts per grid, model and objective, as a table."""
    from depthprune.verify.remeasure import BY_PRECISION, NOT_VERIFIED, VERIFIED
    from depthprune.verify.remeasure import FAILED as CHECK_FAILED

    keys = sorted({(c.grid, c.model, c.objective) for c in checks})
    rows = []
    for key in keys:
        mine = [c for c in checks if (c.grid, c.model, c.objective) == key]
        rows.append([*key, sum(c.status == VERIFIED and not c.forks for c in mine),
                     sum(c.status == VERIFIED and bool(c.forks) for c in mine),
                     sum(c.status == BY_PRECISION for c in mine),
                     sum(c.status == CHECK_FAILED for c in mine), sum(c.status == NOT_VERIFIED for c in mine),
                     max((c.largest_difference for c in mine), default=0.0),
                     " / ".join(sorted({f"{c.band.nats:.2g}" for c in mine if c.band}, key=float)) or None,
                     *_evaluation_columns([c.evaluation for c in mine if c.evaluation is not None])])
    return markdown_table(rows, ["grid", "model", "objective", "verified", "with numeric forks",
                                   "in the recorded precision", "failed",
                                   "not verified", "largest |diff| (nats)", "bands at the budgets (nats)",
                                   "items agreeing (sampled)", "catches item changes of", "largest window |diff|"], numparse=True)


def _evaluation_columns(evals: Sequence[Any]) -> list[Any]:
    """Item agreement over the cells' samples, the widest smallest-caught change, the largest window difference
    (None where no cell was re-evaluated with a band)."""
    evals = [e for e in evals if e.band is not None]
    if not evals:
        return [None, None, None]
    items, disagree = sum(e.items for e in evals), sum(e.disagreements for e in evals)
    return [f"{1 - disagree / items:.2%} ({items})" if items else "not sampled",
            f">= {max(e.detectable for e in evals):.1%}" if items else "not sampled",
            max(e.largest_window_difference for e in evals)]


def model_seconds(checks: Sequence[Any]) -> dict[str, float]:
    """Seconds per model, in the order checked: from the previous model's last cell (or the start) to this
    model's last, so a model's load, calibrations and evaluations count with it."""
    out: dict[str, float] = {}
    previous = 0.0
    for c in checks:
        out[c.model] = out.get(c.model, 0.0) + c.elapsed - previous
        previous = c.elapsed
    return {model: round(seconds, 3) for model, seconds in out.items()}


def model_seconds_line(checks: Sequence[Any]) -> str:
    """The models' seconds as one line (:func:`model_seconds`)."""
    per = model_seconds(checks)
    return "seconds per model: " + (", ".join(f"{m} {s:.1f} s ({sum(c.model == m for c in checks)} cells)"
                                              for m, s in per.items()) or "none")


def remeasure_lines(checks: Sequence[Any]) -> list[str]:
    """A line per cell that is not plainly VERIFIED, and one per fork."""
    from depthprune.verify.remeasure import NOT_VERIFIED

    lines = []
    for c in checks:
        if c.disagreement:
            lines.append(f"{c.label}  {c.grid}/{c.cell}: {c.disagreement}")
        if c.second is not None:
            why = f": {c.second.disagreement}" if c.second.disagreement else ""
            lines.append(f"SECOND OPINION  {c.grid}/{c.cell}: in {c.second.here_class} here, "
                         f"{c.second.label}{why}")
        for f in c.forks:
            d = f.decision
            lines.append(f"NUMERIC FORK  {c.grid}/{c.cell}: {d.kind} decision after evaluation {d.position}: "
                         f"{list(d.chosen)} against {list(d.rival)}, recorded {d.chosen_loss:.6g} / {d.rival_loss:.6g} "
                         f"(gap {d.gap:.3g}), here {f.chosen_here:.6g} / {f.rival_here:.6g}"
                         f"{' (the other way here)' if f.flipped else ''}; band {f.band:.3g}")
        if c.band is not None and c.band.flagged and c.status != NOT_VERIFIED:
            lines.append(f"FLAGGED BAND  {c.grid}/{c.cell}: {c.band.flagged}")
        e = c.evaluation
        if e is not None and e.band is not None and e.band.flagged:
            lines.append(f"FLAGGED EVALUATION BAND  {c.grid}/{c.cell}: {e.band.flagged}")
    return lines

"""REPORT's "How firmly each set is decided": the cells whose set rests on a decision inside a rounding
band (:mod:`depthprune.verify.firmness`), and what the verdicts say when those cells take their rival set.

Re-judging substitutes, in each cell inside a band whose rival answer is known, the rival: in the claims
that read only removed sets and costs (``Claim.reads_evaluation`` False), its set; in the claims that read an
evaluation, also its evaluation, where another cell of the same condition removed that set or the rivals
archive (:mod:`depthprune.grid.measure_rivals`) evaluated it. A verdict that changes is marked in the verdict matrix
as one rounding can flip; one that does not has held against the substitutions that could be made, and the
cells that could not be substituted are counted beside it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from depthprune.report import analysis, claims
from depthprune.report.cells import table
from depthprune.report.verdicts import FLIP_MARK
from depthprune.results.schema import Result
from depthprune.verify.firmness import (
    BANDS,
    FIRM,
    INSIDE,
    UNKNOWN,
    CellFirmness,
    assess,
    cell_firmness,
    decision_key,
    decisive,
    turned,
)
from depthprune.verify.replay import Decision

__all__ = ["BANDS", "EVALUATION_FIELDS", "FIRM", "INSIDE", "METHOD", "SUMMARY_HEADERS", "UNKNOWN", "CellFirmness",
           "Rejudged", "assess", "cell_firmness", "decisive", "flippable", "page", "rejudge", "section", "substitute",
           "summary_rows"]

#: what a substituted cell takes from the rival's evaluated result
EVALUATION_FIELDS = ("metrics", "item_outcomes", "item_clusters", "window_nll", "evaluated", "speed")

#: the page's account of the method (the module docstring's, in the report's words)
METHOD = [
    "A cell's removed set rests on its searcher's decisions, found by replaying its recorded trace: the final "
    "choice against the closest full-budget rival, each step whose best the searcher takes (greedy's, beam's, "
    "fbs's, cbo's; not a chunk of an enumeration, GA's population or BO's design), and the prior's cut where the "
    "searcher read the prior. A decision is *inside a band* when the gap between its two losses is within the band "
    "of `verify/bands.json` for the two numeric classes, measured on held-out sets: under rule 4, the upper bound "
    "on rounding's root-mean-square difference times z for the number of checks the band faces over the archive; "
    "rows measured under rule 3 (each row says which), twice the largest difference. Inside the band a decision *can* come out the other way on a machine of the other class; it need not "
    "(`docs/measurements.md` has the cross-precision runs). Only a band measured for the cell's own model and "
    "objective counts; a borrowed one is \"not measured\".",
    "",
    "A cell's rival answer is the answer had rounding turned its first decisive decision inside the band, and no "
    "other. It is known from the trace where that decision is the final one (the rival is its other set) or "
    "oneshot's prior cut (the two singles swap). After a turned step the search takes a path the trace does not "
    "hold: `depthprune measure rivals` follows it (the searcher run again on the recorded losses with the "
    "decision's two sides swapped, new sets scored with the model) and evaluates each rival set, into "
    "`archive/rivals-<grid>.json` with the machine that made it. To re-judge, each cell with a known rival takes "
    "it: in the claims that read only removed sets and costs, its set; in the claims that read an evaluation, "
    "also the rival's evaluation, from another cell of the same condition that removed that set, else from the "
    "rivals file (this report runs no model). A verdict that changes is one rounding can flip.",
]



def _evaluation_twin_key(r: Result) -> tuple[Any, ...]:
    return (r.identity.grid, r.identity.model, r.identity.objective, r.identity.calibration_seed, r.identity.profile)


def substitute(results: Sequence[Result], cells: Sequence[CellFirmness], evaluation: bool = True,
               rivals: Mapping[tuple[str, str], Mapping[str, Any]] | None = None
               ) -> tuple[list[Result], Counter[str]]:
    """``results`` with each cell inside the band whose rival answer is known taking it. The rival is the
    cell's own (:attr:`depthprune.verify.firmness.CellFirmness.rival`) or, for a turned step, the one
    ``rivals`` (:func:`depthprune.verify.firmness.read_rivals`) followed to. Its evaluation comes from another
    cell of the condition that removed that set, else from ``rivals``; without one the cell keeps its set
    where ``evaluation`` is asked, and takes the set alone where not (claims that read no evaluation).
    Counts: substituted, evaluated here (of those substituted, from ``rivals``), same set (a followed path
    that came back), rival unknown, rival not evaluated."""
    evaluated: dict[tuple[Any, ...], Result] = {}
    for r in results:
        key = (*_evaluation_twin_key(r), tuple(sorted(r["removed"])), repr(r.get("evaluation_protocol")))
        evaluated.setdefault(key, r)
    by_cell = {(c.grid, c.cell): c for c in cells}
    out, counts = [], Counter[str]()
    for r in results:
        c = by_cell.get((str(r.identity.grid), r["cell"]))
        d = turned(c) if c is not None and c.status == INSIDE else None
        if c is None or d is None:
            out.append(r)
            continue
        record = (rivals or {}).get((str(r["cell"]), decision_key(d)))
        rival = c.rival if c.rival is not None else tuple(record["removed"]) if record is not None else None
        if rival is None:
            counts["rival unknown"] += 1
            out.append(r)
            continue
        if list(rival) == sorted(r["removed"]):
            counts["same set"] += 1
            out.append(r)
            continue
        twin = evaluated.get((*_evaluation_twin_key(r), rival, repr(r.get("evaluation_protocol"))))
        source = twin if twin is not None else record if record is not None and record.get("evaluated") else None
        if source is not None:
            counts["substituted"] += 1
            counts["evaluated here"] += source is record
            # the rival's evaluation fields, or none: never the cell's own set's
            out.append(r.replace(drop=[k for k in EVALUATION_FIELDS if k not in source], removed=list(rival),
                                 calibration_loss=source["calibration_loss"],
                                 **{k: source[k] for k in EVALUATION_FIELDS if k in source}))
        elif evaluation:
            counts["rival not evaluated"] += 1
            out.append(r)
        else:
            counts["substituted"] += 1
            loss = record["calibration_loss"] if record is not None else next(
                (x.rival_loss for x in c.inside if x.kind == "final"), math.nan)
            out.append(r.replace(drop=["speed"], removed=list(rival), calibration_loss=loss))
    return out, counts


@dataclass
class Rejudged:
    """The verdicts judged again under one band's substitutions."""

    band: str
    counts: dict[str, dict[str, Counter[str]]] = field(default_factory=dict)  # grid -> "sets"/"evaluation" -> n
    changed: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (claim, grid) -> (was, now)


def rejudge(results: Sequence[Result], verdicts: Sequence[claims.Verdict],
            assessed: Mapping[str, Sequence[CellFirmness]], thresholds: Mapping[str, Any],
            rivals: Mapping[tuple[str, str], Mapping[str, Any]] | None = None) -> list[Rejudged]:
    """Per band: every claim judged again with the substitutions it allows (a claim that reads the
    evaluation: rivals evaluated by another cell; one that does not: every known rival), against
    ``verdicts``."""
    was = {(v.claim.id, v.grid): v.outcome for v in verdicts}
    out = []
    for band, cells in assessed.items():
        rj = Rejudged(band)
        for evaluation, kind in ((True, "evaluation"), (False, "sets")):
            swapped, _ = substitute(results, cells, evaluation, rivals)
            for g in analysis.grids_of(results):
                rj.counts.setdefault(g, {})[kind] = substitute([r for r in results if r.identity.grid == g], cells,
                                                               evaluation, rivals)[1]
            for v in claims.judge_all(swapped, thresholds):
                if v.claim.reads_evaluation != evaluation:
                    continue
                before = was.get((v.claim.id, v.grid))
                if before is not None and before != v.outcome:
                    rj.changed[(v.claim.id, v.grid)] = (before, v.outcome)
        out.append(rj)
    return out


def flippable(rejudged: Iterable[Rejudged]) -> set[tuple[str, str]]:
    """(claim id, grid) of every verdict some band's substitutions change."""
    return {key for rj in rejudged for key in rj.changed}


def _gap(c: CellFirmness) -> str:
    if c.smallest is None or c.smallest_band is None:
        return "-"
    return f"{c.smallest.gap:.3g} / {c.smallest_band:.3g}"


def _decision(d: Decision) -> str:
    where = "prior's cut" if d.kind == "prior" else f"{d.kind} after evaluation {d.position}"
    return f"{where}: {list(d.chosen)} over {list(d.rival)}"


def summary_rows(cells: Sequence[CellFirmness]) -> list[list[Any]]:
    """Per grid: cells, firm, inside (rival known), not measured, and the smallest gap ÷ band."""
    rows = []
    for grid in sorted({c.grid for c in cells}):
        mine = [c for c in cells if c.grid == grid]
        n = Counter(c.status for c in mine)
        known = sum(1 for c in mine if c.status == INSIDE and c.rival is not None)
        ratio = min((c.ratio for c in mine), default=math.inf)
        rows.append([f"`{grid}`", len(mine), n[FIRM], f"{n[INSIDE]} ({known})", n[UNKNOWN],
                     f"{ratio:.2g}" if math.isfinite(ratio) else "-"])
    return rows


SUMMARY_HEADERS = ["grid", "cells", "firm", "inside the band (rival answer known)", "not measured",
                   "smallest gap ÷ band"]


def _why(cells: Sequence[CellFirmness]) -> list[str]:
    reasons = Counter(c.why for c in cells if c.status == UNKNOWN)
    return [f"- not measured, {n} cells: {why}" for why, n in sorted(reasons.items())]


def page(assessed: Mapping[str, Sequence[CellFirmness]], rejudged: Sequence[Rejudged]) -> list[str]:
    """The page: per band, per grid and condition, the cells inside the band and their decisions."""
    lines = [*METHOD, ""]
    by_band = {rj.band: rj for rj in rejudged}
    for band, cells in assessed.items():
        lines += [f"## {band}", "", table(summary_rows(cells), SUMMARY_HEADERS), "", *_why(cells), ""]
        rj = by_band.get(band)
        if rj is not None:
            lines += ["Verdicts re-judged with the rival answers substituted:", "", *_rejudged_lines(rj), ""]
        per: dict[tuple[str, tuple[str, str, int]], list[CellFirmness]] = defaultdict(list)
        for c in cells:
            per[(c.grid, c.condition)].append(c)
        rows = []
        for (grid, (model, objective, budget)), group in sorted(per.items()):
            inside = [c for c in group if c.status == INSIDE]
            measured = [c for c in group if c.status != UNKNOWN]
            if not measured:
                continue
            smallest = min(inside, key=lambda c: c.ratio) if inside else None
            searchers = Counter(c.search for c in inside)
            rows.append([f"`{grid}`", model, objective, budget, f"{len(inside)} of {len(measured)}",
                         sum(1 for c in inside if c.rival is not None), _gap(smallest) if smallest else "-",
                         ", ".join(f"{s} ×{n}" if n > 1 else s for s, n in sorted(searchers.items())) or "-"])
        if rows:
            lines += ["Per condition: the cells resting on a decision inside the band, how many of them have a known "
                      "rival answer, the smallest decisive gap against its band (nats), and their searchers:", "",
                      table(rows, ["grid", "model", "objective", "M", "cells inside", "rival known",
                                   "smallest gap / band", "searchers inside"]), ""]
        detail = [[f"`{c.grid}`", c.cell, _decision(c.smallest) if c.smallest else "-", _gap(c),
                   str(list(c.rival)) if c.rival else "unknown" + (" (replayed in part)" if c.partial else "")]
                  for c in cells if c.status == INSIDE]
        if detail:
            lines += ["Each such cell's smallest decisive decision and its rival answer:", "",
                      table(detail, ["grid", "cell", "decision", "gap / band (nats)", "rival answer"]), ""]
    return lines


def _rejudged_lines(rj: Rejudged) -> list[str]:
    lines = []
    for grid, n in sorted(rj.counts.items()):
        sets, ev = n.get("sets", Counter()), n.get("evaluation", Counter())
        if not sum(sets.values()):
            lines.append(f"- `{grid}`: no cell inside the band (or none measured): nothing to re-judge.")
            continue
        changed = [f"{claim} {was} → {now}" for (claim, g), (was, now) in sorted(rj.changed.items()) if g == grid]
        parts = [f"{sets['substituted']} cells take their rival set in the claims that read only sets and costs, "
                 f"{ev['substituted']} also its evaluation in the claims that read one"
                 + (f" ({ev['evaluated here']} evaluated by `depthprune measure rivals`)" if ev["evaluated here"] else "")]
        if ev["rival not evaluated"]:
            parts.append(f"{ev['rival not evaluated']} rivals no cell evaluated keep their set there")
        if sets["same set"]:
            parts.append(f"{sets['same set']} followed turns lead back to the cell's own set")
        if sets["rival unknown"]:
            parts.append(f"{sets['rival unknown']} rest on a step inside the band whose answer is not followed yet "
                         "(`depthprune measure rivals`) and keep their set")
        lines.append(f"- `{grid}`: {'; '.join(parts)}. "
                     + (f"Verdicts that change: {'; '.join(changed)}." if changed else
                        "No verdict changes with the substitutions that could be made."))
    return lines


def section(assessed: Mapping[str, Sequence[CellFirmness]], rejudged: Sequence[Rejudged], link: str) -> list[str]:
    """REPORT.md's short section: per band and grid, the counts, and the verdicts rounding can flip."""
    lines = ["How many cells rest on a searcher decision that rounding could turn, per band (bf16 on AMX against "
             "fp32 on a CPU without AMX; against bf16 on other kernels), and whether the verdicts hold when those "
             f"cells take their rival answer. Verdicts that change are marked {FLIP_MARK} in the matrix. The method, "
             f"every condition and every such cell: [{link}]({link}).", ""]
    by_band = {rj.band: rj for rj in rejudged}
    for band, cells in assessed.items():
        lines += [f"**{band}**", "", table(summary_rows(cells), SUMMARY_HEADERS), "", *_why(cells), ""]
        if band in by_band:
            lines += [*_rejudged_lines(by_band[band]), ""]
    return lines
